// The baseline selectors behind make_selector (exact, window, topk, uniform, oracle).
#pragma once
#include <memory>

#include "codec/spec_parser.hpp"
#include "kvsketch/sparse_attention.hpp"

namespace kvsketch {

// nullptr when parsed.name is not a baseline.
std::unique_ptr<TokenSelector> make_baseline_selector(const ParsedSpec& parsed, size_t dim, uint64_t seed);

}  // namespace kvsketch

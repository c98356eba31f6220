#include "codec/channel_split.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <typeinfo>
#include <cmath>
#include <memory>
#include <numeric>

#include "core/kernel_memory.hpp"
#include "codec/accumulator_slices.hpp"
#include "codec/channel_list.hpp"
#include "codec/spec_parser.hpp"
#include "simd/kernels.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"

namespace kvsketch {
namespace {

struct SplitQuery : PreparedQuery {
  std::vector<std::unique_ptr<PreparedQuery>> parts;
};

KernelVector<const PreparedQuery*> part_queries(const PreparedQuery* const* queries, size_t heads, size_t part) {
  KernelVector<const PreparedQuery*> out(heads);
  for (size_t h = 0; h < heads; ++h) out[h] = static_cast<const SplitQuery&>(*queries[h]).parts[part].get();
  return out;
}

// "N", "P%" or "" (the rest) for a part of a split of dim channels.
size_t part_count(const std::string& spec, const std::string& text, size_t dim, size_t rest) {
  if (text.empty()) return rest;
  const bool percent = text.back() == '%';
  const std::string digits = percent ? text.substr(0, text.size() - 1) : text;
  require(!digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos && digits.size() <= 6,
          "codec '{}': channel count '{}' is not N or P%", spec, text);
  const size_t value = std::stoul(digits);
  return percent ? static_cast<size_t>(std::lround(static_cast<double>(dim) * static_cast<double>(value) / 100.0))
                 : value;
}

// "split:A@N+B@M+C" -> ({A, B, C}, {"N", "M", ""}).
struct SplitItems {
  std::vector<std::string> specs, counts;
};

SplitItems parse_split_items(const std::string& spec) {
  SplitItems items;
  const std::string body = spec.substr(spec.find(':') + 1);
  size_t start = 0;
  while (true) {
    const size_t plus = body.find('+', start);
    const std::string item = body.substr(start, plus == std::string::npos ? std::string::npos : plus - start);
    const size_t at = item.rfind('@');
    items.specs.push_back(item.substr(0, at));
    items.counts.push_back(at == std::string::npos ? "" : item.substr(at + 1));
    require(!items.specs.back().empty() && (at != std::string::npos || plus == std::string::npos),
            "codec '{}': expected split:SPEC@N+SPEC@N... (only the last part may leave out @N), got '{}'", spec, item);
    if (plus == std::string::npos) return items;
    start = plus + 1;
  }
}

}  // namespace

size_t split_fixed_dim(const std::string& spec) {
  if (spec.rfind("split:", 0) != 0) return 0;
  size_t total = 0;
  for (const std::string& count : parse_split_items(spec).counts) {
    if (count.empty() || count.back() == '%' || count.find_first_not_of("0123456789") != std::string::npos ||
        count.size() > 6)
      return 0;
    total += std::stoul(count);
  }
  return total;
}

ChannelSplit::ChannelSplit(size_t dim, std::vector<std::unique_ptr<TurboQuant>> parts)
    : CodecBase(dim), parts_(std::move(parts)) {
  require(parts_.size() >= 2, "split: needs at least two parts, got {}", parts_.size());
  size_t total = 0;
  for (const auto& part : parts_) {
    code_offsets_.push_back(code_bytes_);
    accumulator_offsets_.push_back(accumulator_size_);
    code_bytes_ += part->code_bytes();
    accumulator_size_ += part->accumulator_size();
    total += part->dim();
  }
  require(total == dim, "split: the parts have {} channels in all, the dimension is {}", total, dim);
  for (auto& part : parts_) part->set_row_stride(code_bytes_);
  std::vector<size_t> order(dim);
  std::iota(order.begin(), order.end(), 0);
  assign_channels(order);
}

std::string ChannelSplit::spec() const {
  std::string text = "split:";
  for (size_t p = 0; p < parts_.size(); ++p)
    text += fmt::format("{}{}@{}", p ? "+" : "", parts_[p]->spec(), parts_[p]->dim());
  return text;
}

bool ChannelSplit::unbiased_inner_products() const {
  return std::all_of(parts_.begin(), parts_.end(), [](const auto& part) { return part->unbiased_inner_products(); });
}

void ChannelSplit::assign_channels(const std::vector<size_t>& order) {
  channels_.assign(parts_.size(), {});
  size_t next = 0;
  for (size_t p = 0; p < parts_.size(); ++p) {
    channels_[p].assign(order.begin() + next, order.begin() + next + parts_[p]->dim());
    std::sort(channels_[p].begin(), channels_[p].end());
    next += parts_[p]->dim();
  }
}

void ChannelSplit::calibrate(const float* x, size_t n) {
  if (n == 0) return;
  require_finite(x, n, dim(), "calibrate");
  assign_channels(channels_by_energy(x, n, dim()));
}

std::vector<uint8_t> ChannelSplit::calibration() const {
  std::vector<size_t> listed;
  for (size_t p = 0; p + 1 < parts_.size(); ++p) listed.insert(listed.end(), channels_[p].begin(), channels_[p].end());
  return channel_list_bytes(listed);
}

void ChannelSplit::set_calibration(const std::vector<uint8_t>& state) {
  const size_t listed = dim() - parts_.back()->dim();
  std::vector<size_t> order = channel_list_from_bytes(state, listed, spec());
  const std::vector<bool> seen = channel_membership(order, dim(), spec());
  for (size_t c = 0; c < dim(); ++c)
    if (!seen[c]) order.push_back(c);
  assign_channels(order);
}

void ChannelSplit::encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const {
  require_finite(x, n, dim(), "encode", first_row);
  std::vector<float> gathered;
  for (size_t p = 0; p < parts_.size(); ++p) {
    const auto& channels = channels_[p];
    gathered.resize(n * channels.size());
    for (size_t i = 0; i < n; ++i)
      simd::gather_floats(x + i * dim(), channels.data(), channels.size(), gathered.data() + i * channels.size());
    parts_[p]->encode_rows(gathered.data(), n, codes + code_offsets_[p], first_row);
  }
}

std::unique_ptr<PreparedQuery> ChannelSplit::prepare_query(const float* q) const {
  auto prepared = std::make_unique<SplitQuery>();
  std::vector<float> gathered;
  for (size_t p = 0; p < parts_.size(); ++p) {
    gathered.resize(channels_[p].size());
    simd::gather_floats(q, channels_[p].data(), channels_[p].size(), gathered.data());
    prepared->parts.push_back(parts_[p]->prepare_query(gathered.data()));
  }
  return prepared;
}

bool ChannelSplit::reprepare_query(const float* q, PreparedQuery& into) const {
  if (typeid(into) != typeid(SplitQuery)) return false;
  auto& prepared = static_cast<SplitQuery&>(into);
  if (prepared.parts.size() != parts_.size()) return false;
  thread_local std::vector<float> gathered;  // kept: a warm call allocates nothing
  for (size_t p = 0; p < parts_.size(); ++p) {
    gathered.resize(channels_[p].size());
    simd::gather_floats(q, channels_[p].data(), channels_[p].size(), gathered.data());
    if (!parts_[p]->reprepare_query(gathered.data(), *prepared.parts[p])) return false;
  }
  return true;
}

void ChannelSplit::score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const {
  const auto& query = static_cast<const SplitQuery&>(q);
  std::vector<float> part_scores(n);
  parts_[0]->score_rows(*query.parts[0], codes, n, out);
  for (size_t p = 1; p < parts_.size(); ++p) {
    parts_[p]->score_rows(*query.parts[p], codes + code_offsets_[p], n, part_scores.data());
    for (size_t i = 0; i < n; ++i) out[i] += part_scores[i];
  }
}

void ChannelSplit::accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const {
  for (size_t p = 0; p < parts_.size(); ++p)
    parts_[p]->accumulate_rows(weights, codes + code_offsets_[p], n, accumulator + accumulator_offsets_[p]);
}

void ChannelSplit::score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n,
                                    float* out, size_t stride, Arithmetic arithmetic) const {
  const auto part_scores = kernel_array<float>(heads * n);  // every score is written
  parts_[0]->score_rows_multi(part_queries(queries, heads, 0).data(), heads, codes, n, out, stride, arithmetic);
  for (size_t p = 1; p < parts_.size(); ++p) {
    parts_[p]->score_rows_multi(part_queries(queries, heads, p).data(), heads, codes + code_offsets_[p], n,
                                part_scores.get(), n, arithmetic);
    for (size_t h = 0; h < heads; ++h)
      for (size_t i = 0; i < n; ++i) out[h * stride + i] += part_scores[h * n + i];
  }
}

void ChannelSplit::accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes,
                                         size_t n, float* accumulators, Arithmetic arithmetic) const {
  for (size_t p = 0; p < parts_.size(); ++p)
    with_accumulator_slices(accumulators, heads, accumulator_size_, accumulator_offsets_[p],
                            parts_[p]->accumulator_size(), [&](float* slices) {
                              parts_[p]->accumulate_rows_multi(weights, heads, stride, codes + code_offsets_[p], n,
                                                               slices, arithmetic);
                            });
}

void ChannelSplit::describe_row(RowLayout& layout) const {
  layout.row_bytes = code_bytes_;
  layout.has_keys = layout.has_values = true;
  for (size_t p = 0; p < parts_.size(); ++p) {
    const RowLayout& part = parts_[p]->row_layout();
    const size_t bytes = code_offsets_[p];
    const auto moved = [&](RowLayout::Part piece, size_t domain) {
      piece.indices.offset += bytes;
      if (piece.factor) piece.factor->offset += bytes;
      piece.domain += domain;
      return piece;
    };
    for (RowLayout::Field field : part.fields) {
      field.offset += bytes;
      layout.fields.push_back(field);
    }
    layout.has_keys = layout.has_keys && part.has_keys && !part.key_shift;
    for (RowLayout::KeyGroup group : part.key_groups) {
      group.first += layout.key_parts.size();
      if (group.factor) group.factor->offset += bytes;
      layout.key_groups.push_back(group);
    }
    for (const RowLayout::Part& piece : part.key_parts) layout.key_parts.push_back(moved(piece, layout.key_domain));
    layout.key_domain += part.key_domain;
    layout.has_values = layout.has_values && part.has_values;
    for (const RowLayout::Part& piece : part.value_parts)
      layout.value_parts.push_back(moved(piece, accumulator_offsets_[p]));
    for (const size_t slot : part.weight_sums) layout.weight_sums.push_back(slot + accumulator_offsets_[p]);
  }
  layout.accumulator = accumulator_size_;
}

void ChannelSplit::key_domain(const PreparedQuery& q, float* out) const {
  const auto& query = static_cast<const SplitQuery&>(q);
  for (size_t p = 0; p < parts_.size(); ++p) {
    parts_[p]->key_domain(*query.parts[p], out);
    out += parts_[p]->row_layout().key_domain;
  }
}

void ChannelSplit::finish_accumulator(const float* accumulator, float* out) const {
  std::vector<float> part_out;
  for (size_t p = 0; p < parts_.size(); ++p) {
    part_out.assign(parts_[p]->dim(), 0.0f);
    parts_[p]->finish_accumulator(accumulator + accumulator_offsets_[p], part_out.data());
    for (size_t j = 0; j < part_out.size(); ++j) out[channels_[p][j]] += part_out[j];
  }
}

std::unique_ptr<VectorCodec> make_channel_split(const std::string& spec, size_t dim, uint64_t seed) {
  std::vector<std::string> part_specs, counts;
  if (spec.rfind("split:", 0) == 0) {
    SplitItems items = parse_split_items(spec);
    part_specs = std::move(items.specs);
    counts = std::move(items.counts);
  } else {
    const ParsedSpec shorthand = parse_spec(spec);
    // tq_mse:b=2.5 -> a quarter of the channels at 3 bits, the rest at 2; other parameters to both.
    const std::string& bits = shorthand.values.at("b");
    require(bits.size() == 3 && bits[0] >= '1' && bits[0] <= '7' && bits.substr(1) == ".5",
            "codec '{}': parameter b={} must be an integer 1..8 or a half 1.5..7.5 (outlier split)", shorthand.name,
            bits);
    std::string rest;
    for (const auto& [key, value] : shorthand.values) {
      if (key == "seed") seed = static_cast<uint64_t>(SpecParameters(shorthand.name, {{key, value}}, {"seed"}).integer(
                             "seed", 0, 0, INT64_MAX));
      else if (key != "b") rest += "," + key + "=" + value;
    }
    const int low = bits[0] - '0';
    part_specs = {fmt::format("{}:b={}{}", shorthand.name, low + 1, rest), fmt::format("{}:b={}{}", shorthand.name, low, rest)};
    counts = {"25%", ""};
  }
  require(part_specs.size() >= 2, "codec '{}': a split needs at least two parts", spec);
  std::vector<size_t> sizes(part_specs.size());
  size_t listed = 0;
  for (size_t p = 0; p + 1 < part_specs.size(); ++p) listed += sizes[p] = part_count(spec, counts[p], dim, 0);
  require(listed < dim, "codec '{}': the parts take {} of {} channels, leaving none for the last", spec, listed, dim);
  sizes.back() = part_count(spec, counts.back(), dim, dim - listed);
  std::vector<std::unique_ptr<TurboQuant>> parts;
  for (size_t p = 0; p < part_specs.size(); ++p) {
    require(sizes[p] >= 2, "codec '{}': part {} ('{}') gets {} channels; each part needs at least 2", spec, p,
            part_specs[p], sizes[p]);
    const std::string name = parse_spec(part_specs[p]).name;
    require(name == "tq_mse" || name == "tq_prod", "codec '{}': split parts must be tq_mse or tq_prod, got '{}'", spec,
            part_specs[p]);
    std::unique_ptr<VectorCodec> codec = make_codec(part_specs[p], sizes[p], derive_seed(seed, {0x5b1170, p}));
    auto* turboquant = dynamic_cast<TurboQuant*>(codec.get());
    require(turboquant != nullptr, "codec '{}': part '{}' is itself split; nest no splits", spec, part_specs[p]);
    codec.release();
    parts.emplace_back(turboquant);
  }
  return std::make_unique<ChannelSplit>(dim, std::move(parts));
}

}  // namespace kvsketch

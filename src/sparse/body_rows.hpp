// Reading selected tokens' keys and values from a BodyView, whatever its storage (floats, fp16 or
// a codec's rows): the scattered-row access of selection attention. Each call reads its rows as
// one gather (the kernels fetch rows ahead), never one virtual call or dispatch per token.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvsketch/sparse_attention.hpp"

namespace kvsketch {

// Refuses a view without exactly one storage for keys and for values, or whose parts disagree
// on tokens or dimension.
void check_body(const BodyView& body, const char* operation);

// Refuses a body other than the one a selector indexed: `tokens` appended rows of `dim` values.
void require_indexed_body(const BodyView& body, size_t tokens, size_t dim, const char* selector);

// out[s] = scale * <query, k_{tokens[s]}> for s < n; tokens == nullptr reads rows 0..n-1. Keys in
// a codec are scored from the codes (the query prepared once per call).
void body_key_scores(const float* query, const BodyView& body, const uint32_t* tokens, size_t n, float scale,
                     float* out);

// sum_s weights[s] v_{tokens[s]}, held in the value storage's accumulator domain (a codec's
// rotated domain) and turned into values once, by finish().
class BodyValueSum {
 public:
  explicit BodyValueSum(const BodyView& body);
  void add(const uint32_t* tokens, const float* weights, size_t n);
  void scale(float factor);
  // out (dim floats) = the sum.
  void finish(float* out) const;

 private:
  const BodyView& body_;
  std::vector<float> accumulator_;
};

}  // namespace kvsketch

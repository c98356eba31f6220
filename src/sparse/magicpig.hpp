// MagicPIG's LSH sampler as a TokenSelector (see magicpig.cpp for the decisions).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "kvsketch/sparse_attention.hpp"
#include "sparse/lsh_tables.hpp"

namespace kvsketch {

// u = P[at least `hits` of `tables` tables collide], each table colliding with probability p^bits,
// p = 1 - arccos(cosine) / pi (the paper's Eq. 10, any number of hits).
double magicpig_inclusion_probability(double cosine, int bits, int tables, int hits);

// Index bytes per token of `tables` tables of `bits` bits, at most, over a stream of
// kMagicPigCapTokens tokens or more: the ids, or the raw codes at capacity (grown by a quarter at a
// time; lsh_tables.hpp), the blocks' bucket starts (heaviest per token at that length: one block,
// partly filled) and ||k - c|| (4 bytes).
inline constexpr size_t kMagicPigCapTokens = 16384;
double magicpig_bytes_per_token(int bits, int tables);
// The most tables whose index stays within `cap` times the fp16 keys and values it indexes (4 dim
// bytes per token) from kMagicPigCapTokens tokens on, with 10% to spare for the buffers' growth.
// At d = 64 the paper's (10, 150) tables take about 1.2-1.35 times that cache;
// magicpig:...,cap=1 keeps them below it.
int magicpig_tables_within(int bits, size_t dim, double cap);

class MagicPig final : public TokenSelector {
 public:
  MagicPig(size_t dim, int bits, int tables, int hits, bool center, uint64_t seed);
  std::string spec() const override;
  std::unique_ptr<TokenSelector> clone() const override { return std::make_unique<MagicPig>(*this); }
  void append(const float* keys, const float* values, size_t n) override;
  size_t tokens() const override { return tokens_; }
  TokenSelection select(const float* query, const BodyView& body, uint64_t draw) const override;
  // The tables (lsh_tables.hpp) and ||k - c|| (4 bytes per token), at capacity. The projection
  // matrix (d x K L floats) is shared by every clone (one per layer and head, as in the paper) and
  // reported by projection_bytes().
  size_t index_bytes() const override;
  size_t projection_bytes() const { return projection_->size() * sizeof(float); }

 private:
  void codes_of(const float* x, std::vector<uint32_t>& out) const;
  double neg_log_inclusion(double cosine) const;

  static constexpr size_t kPanelRows = 64;
  static constexpr double kGridFloor = -0.5;
  static constexpr size_t kGridIntervals = 6144;

  size_t dim_;
  int bits_, tables_, hits_;
  bool center_;
  size_t tokens_ = 0;
  // K L directions of d coordinates, in panels (see the constructor); immutable, shared by clones.
  std::shared_ptr<const std::vector<float>> projection_;
  // The centres c_e, one per epoch (contiguous token ranges, epoch_starts_), each the mean of every
  // key appended up to the end of the append that opened the epoch (see append()).
  std::vector<float> centres_;
  std::vector<uint32_t> epoch_starts_;
  std::vector<double> key_sum_;    // of every key appended
  size_t tokens_at_refresh_ = 0;   // tokens known when the last epoch opened
  LshTables tables_index_;
  std::vector<float> norms_;  // ||k_i - c_e|| with the epoch's centre
  // -log u at kGridIntervals + 1 cosines from kGridFloor to 1; immutable, shared by clones.
  std::shared_ptr<const std::vector<double>> neg_log_u_grid_;
};

}  // namespace kvsketch

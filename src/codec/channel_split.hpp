// ChannelSplit: TurboQuant with an outlier-channel split, the two-tier scheme behind the paper's
// fractional bit widths (TurboQuant section 2.3, after QJL section 4.1). The channels are
// partitioned into parts, and each part is rotated and quantized by its own TurboQuant (its own
// rotation, the codebook for its dimension, its own norm): e.g. the 32 loudest of 128 channels at
// 3 bits and the other 96 at 2 bits. calibrate() picks the channels by mean square over the
// calibration rows, loudest to the first part; until then the parts take the channels in order.
//
// Spec: split:SPEC@N+SPEC@N+...  (N channels, or P% of the dimension; the last part's count may be
// left out and means the rest). Parts are tq_mse or tq_prod specs. Shorthand: tq_mse:b=2.5 (any
// b = k + 0.5) is split:tq_mse:b=3@25%+tq_mse:b=2, the paper's 32 + 96 of 128; with the two fp16
// norms that is exactly (32*3 + 96*2 + 2*16) / 128 = 2.5 stored bits per value at d = 128.
//
// Row layout: the parts' rows side by side, [part 0 | part 1 | ...]; each part reads its bytes
// inside the wider row. The channel lists of every part but the last (u16 each) are the codec's
// calibration state: a cache counts them in its bytes and saves them.
#pragma once
#include <memory>
#include <vector>

#include "codec/turboquant.hpp"
#include "codec/codec_base.hpp"

namespace kvsketch {

class ChannelSplit final : public CodecBase {
 public:
  // Parts in order (outliers first); their dimensions must add up to dim.
  ChannelSplit(size_t dim, std::vector<std::unique_ptr<TurboQuant>> parts);
  std::string spec() const override;
  size_t code_bytes() const override { return code_bytes_; }
  size_t state_bytes() const override {
    size_t total = 0;
    for (const auto& part : parts_) total += part->state_bytes();
    return total;
  }
  bool unbiased_inner_products() const override;
  size_t accumulator_size() const override { return accumulator_size_; }
  void finish_accumulator(const float* accumulator, float* out) const override;

  void calibrate(const float* x, size_t n) override;
  bool calibrated_by_data() const override { return true; }
  std::vector<uint8_t> calibration() const override;
  void set_calibration(const std::vector<uint8_t>& state) override;
  // Channels of each part (ascending within a part), as simd::gather_floats takes them.
  const std::vector<std::vector<uint32_t>>& part_channels() const { return channels_; }
  size_t part_count() const { return parts_.size(); }
  const TurboQuant& part(size_t p) const { return *parts_[p]; }

 protected:
  void encode_rows(const float* x, size_t n, uint8_t* codes, size_t first_row) const override;
  std::unique_ptr<PreparedQuery> prepare_query(const float* q) const override;
  bool reprepare_query(const float* q, PreparedQuery& into) const override;
  void score_rows(const PreparedQuery& q, const uint8_t* codes, size_t n, float* out) const override;
  void accumulate_rows(const float* weights, const uint8_t* codes, size_t n, float* accumulator) const override;
  void score_rows_multi(const PreparedQuery* const* queries, size_t heads, const uint8_t* codes, size_t n, float* out,
                        size_t stride, Arithmetic arithmetic) const override;
  void accumulate_rows_multi(const float* weights, size_t heads, size_t stride, const uint8_t* codes, size_t n,
                             float* accumulators, Arithmetic arithmetic) const override;
  // Every part's layout at its place in the row, its query coordinates and its accumulator slice:
  // a key group per part, the groups' scores added in order as score_rows_multi adds them.
  void describe_row(RowLayout& layout) const override;
  // The parts' key domains one after another.
  void key_domain(const PreparedQuery& q, float* out) const override;

 private:
  // Takes a channel order (every channel once): the first dims go to part 0, and so on.
  void assign_channels(const std::vector<size_t>& order);

  std::vector<std::unique_ptr<TurboQuant>> parts_;
  std::vector<std::vector<uint32_t>> channels_;  // dim <= 8192 (make_codec)
  std::vector<size_t> code_offsets_, accumulator_offsets_;
  size_t code_bytes_ = 0, accumulator_size_ = 0;
};

// Builds split:... specs and the tq_*:b=k.5 shorthand (see above); seed derives the parts' seeds.
std::unique_ptr<VectorCodec> make_channel_split(const std::string& spec, size_t dim, uint64_t seed);

// The dimension a "split:" spec fixes when every part gives an absolute channel count
// ("split:tq_mse:b=3@32+tq_mse:b=2@96" -> 128); 0 when it fits any dimension.
size_t split_fixed_dim(const std::string& spec);

}  // namespace kvsketch

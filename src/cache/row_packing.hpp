// How a cache packs the rows of its code blocks: plain (one row after another) or in quads (four
// rows interleaved, simd/quad_rows.hpp), which the fused decode kernel reads four rows per load on
// AVX3_DL while other CPUs would copy them back first. The same codes, bytes and results either
// way, so the packing is the cache's own choice per CPU, not part of a policy or a codec spec;
// files always hold plain rows (code_rows_io.hpp).
#pragma once
#include <cstddef>

#include "codec/codec_base.hpp"
#include "kvsketch/kv_policy.hpp"

namespace kvsketch {

enum class RowPacking {
  kAuto,   // quads where this CPU's fused kernel reads both the key and the value rows in place
  kPlain,
  kQuads,  // wherever the codec's rows have fields to interleave and a block holds whole quads
};

// The packing caches built on this thread use now: a ScopedRowPacking's where one is alive, else
// KVSKETCH_PACKING from the environment (auto, plain or quads; to measure one against the other),
// else auto. An unknown KVSKETCH_PACKING is an Error naming it.
RowPacking current_row_packing();

// Sets the packing of caches built on this thread while it lives (the selection caches keep plain
// rows, which their scattered reads take without copying).
class ScopedRowPacking {
 public:
  explicit ScopedRowPacking(RowPacking packing);
  ~ScopedRowPacking();
  ScopedRowPacking(const ScopedRowPacking&) = delete;
  ScopedRowPacking& operator=(const ScopedRowPacking&) = delete;

 private:
  int previous_;
};

// Whether a cache with this packing and block stores the rows of `key` and `value` (plain codecs
// of head_dim) in quads, each.
struct PackedPair {
  bool key = false, value = false;
};
PackedPair packed_in_quads(const KVCodecPair& pair, RowPacking packing, size_t block, size_t head_dim);

// `codec` as the cache stores it: wrapped in QuadRowsCodec where `quads`.
std::unique_ptr<CodecBase> packed_codec(std::unique_ptr<VectorCodec> codec, bool quads);

// Whether `codec` stores its rows in quads.
bool rows_in_quads(const VectorCodec& codec);

}  // namespace kvsketch

#include "cache/code_rows_io.hpp"

#include <cstring>
#include <vector>

#include "codec/quad_rows_codec.hpp"

namespace kvsketch {
namespace {

// The rows' layout where the codec holds them in quads (QuadRowsCodec), else null.
const simd::QuadLayout* quad_layout(const VectorCodec& codec) {
  const auto* quads = dynamic_cast<const QuadRowsCodec*>(&codec);
  return quads ? &quads->layout() : nullptr;
}

}  // namespace

void write_code_rows(BinaryWriter& out, const VectorCodec& codec, const CodeBuffer& codes) {
  const simd::QuadLayout* quads = quad_layout(codec);
  if (!quads) return out.raw(codes.data().data(), codes.bytes());
  std::vector<uint8_t> plain(codes.bytes());
  quads->to_rows(codes.data().data(), codes.size(), plain.data());
  out.raw(plain.data(), plain.size());
}

void read_code_rows(BinaryReader& in, const VectorCodec& codec, size_t rows, CodeBuffer& codes, const char* what) {
  const size_t code_bytes = codec.code_bytes();
  require(code_bytes == 0 || rows <= in.remaining() / code_bytes, "load: {} is truncated or corrupted: {} claim {} rows",
          in.path(), what, rows);
  codes = codec.make_buffer();
  codes.resize(rows);
  if (rows == 0) return;
  const uint8_t* plain = in.take(rows * code_bytes, what);
  if (const simd::QuadLayout* quads = quad_layout(codec))
    quads->to_quads(plain, rows, codes.data().data());
  else
    std::memcpy(codes.data().data(), plain, rows * code_bytes);
}

}  // namespace kvsketch

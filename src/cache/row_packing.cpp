#include "cache/row_packing.hpp"

#include <cstdlib>
#include <string>

#include "codec/quad_rows_codec.hpp"
#include "core/require.hpp"

namespace kvsketch {
namespace {

constexpr int kNoScope = -1;
thread_local int scoped_packing = kNoScope;

RowPacking environment_packing() {
  const char* setting = std::getenv("KVSKETCH_PACKING");
  if (setting == nullptr || std::string(setting).empty() || std::string(setting) == "auto") return RowPacking::kAuto;
  if (std::string(setting) == "plain") return RowPacking::kPlain;
  if (std::string(setting) == "quads") return RowPacking::kQuads;
  throw Error(std::string("KVSKETCH_PACKING=") + setting + " is not a row packing; choose auto, plain or quads");
}

}  // namespace

RowPacking current_row_packing() {
  return scoped_packing == kNoScope ? environment_packing() : static_cast<RowPacking>(scoped_packing);
}

ScopedRowPacking::ScopedRowPacking(RowPacking packing) : previous_(scoped_packing) {
  scoped_packing = static_cast<int>(packing);
}

ScopedRowPacking::~ScopedRowPacking() { scoped_packing = previous_; }

PackedPair packed_in_quads(const KVCodecPair& pair, RowPacking packing, size_t block, size_t head_dim) {
  if (packing == RowPacking::kPlain || block % 4 != 0) return {};
  // What the rows are does not depend on the seeds: one answer serves every head of a layer.
  const auto quads = [&](const std::string& spec) -> std::unique_ptr<QuadRowsCodec> {
    auto codec = make_codec(spec, head_dim);
    if (!QuadRowsCodec::rearranges(*codec)) return nullptr;
    return std::make_unique<QuadRowsCodec>(std::move(codec));
  };
  const auto key = quads(pair.key), value = quads(pair.value);
  if (packing == RowPacking::kAuto && (!key || !value || !key->read_in_place(true) || !value->read_in_place(false)))
    return {};
  return {key != nullptr, value != nullptr};
}

std::unique_ptr<CodecBase> packed_codec(std::unique_ptr<VectorCodec> codec, bool quads) {
  if (quads) return std::make_unique<QuadRowsCodec>(std::move(codec));
  return codec_base(std::move(codec));
}

bool rows_in_quads(const VectorCodec& codec) { return dynamic_cast<const QuadRowsCodec*>(&codec) != nullptr; }

}  // namespace kvsketch

// A page store's planes in host memory, filled from CPU rows by store_rows' own copy (store_row):
// each part's packed indices one after the other, one fp16 norm per part, tq_prod's gammas in
// their own plane. For running the kernels' functions on the CPU.
#pragma once
#include <cstdint>
#include <vector>

#include "cuda/encode_row.cuh"
#include "cuda/encode_targets.cuh"
#include "cuda/kernels.hpp"

namespace kvsketch::cuda {

// Encodes one row of head `head` into a CPU row with the GPU's encode function run on the CPU, as
// the encode kernel's rows mode writes it (target_of): each part's indices and norm in turn
// (tq_prod: its signs after the indices, then the norm and gamma).
inline int encode_cpu_row(const detail::PartView& view, int head, const float* in, uint8_t* row) {
  static detail::EncodeScratch scratch;
  detail::EncodeTarget target;
  target.rows = row;
  for (int p = 0; p < view.part_count; ++p) {
    uint8_t *indices, *norm, *gamma;
    detail::target_of(target, view, p, head, 0, &indices, &norm, &gamma);
    const int result = detail::encode_row(view, p, head, in, scratch, indices, norm, gamma, 0);
    if (result != detail::kEncoded) return result;
  }
  return detail::kEncoded;
}

struct HostPlanes {
  const detail::PartView* view = nullptr;
  std::vector<uint4> packed;  // 16-byte aligned, as the page pool's planes
  std::vector<uint16_t> norms, gammas;

  HostPlanes(const detail::PartView& part, size_t slots)
      : view(&part), packed((slots * part.packed_bytes + 15) / 16 + 1), norms(slots * part.part_count), gammas(slots) {}

  // Where encode and store_rows write into these planes (slots of pages of page_tokens tokens).
  detail::EncodeTarget target(const int64_t* slots, int page_tokens, int kv_heads, int64_t total_slots) {
    detail::EncodeTarget target;
    target.slots = slots;
    target.indices = reinterpret_cast<uint8_t*>(packed.data());
    target.norms = norms.data();
    target.gammas = view->gammas() ? gammas.data() : nullptr;
    target.norms_per_token = view->part_count;
    target.page_tokens = page_tokens;
    target.kv_heads = kv_heads;
    target.total_slots = total_slots;
    return target;
  }

  // The CPU row `row` (as VectorCodec::encode writes it) at plane index `plane`.
  void store(const uint8_t* row, size_t plane) { detail::store_row(*view, row, plane, target(nullptr, 0, 0, 0), 0, 1); }
  const uint8_t* indices() const { return reinterpret_cast<const uint8_t*>(packed.data()); }
};

}  // namespace kvsketch::cuda

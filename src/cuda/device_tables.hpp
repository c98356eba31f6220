// What DeviceLayerCodecs holds: the kernels' views of its codecs and the device memory behind them.
#pragma once
#include "cuda/device_memory.hpp"
#include "cuda/kernels.hpp"
#include "kvsketch/cuda.hpp"

namespace kvsketch::cuda {

struct DeviceLayerCodecs::Tables {
  size_t kv_heads = 0, dim = 0;
  detail::PartView keys, values;
  DeviceBuffer memory;   // the rotations' factors and flips, the sketches
  DeviceBuffer channels;  // the splits' channel lists
  DeviceBuffer failure;  // one word: encode's first bad row
  const detail::PartView& part(Part which) const { return which == Part::kKeys ? keys : values; }
};

// The checks every entry point makes of a page store; `who` names the call in the message.
void check_page_tokens(size_t page_tokens, const char* who);
void check_page_store(const DeviceLayerCodecs& codecs, const DevicePages& pages, const char* who);

}  // namespace kvsketch::cuda

// Software prefetch for the kernels that stream rows from memory.
#pragma once

namespace kvsketch::simd {

// Asks for the cache line at p into L2 (prefetcht2 on x86). Not into L1: the fp16 scores stalled
// on prefetcht0 requests, and with these and the row kernels' fetch schedule the fp16 decode step
// reads a larger share of one core's bandwidth (docs/RESULTS.md, "Kernel design measurements").
// always_inline: GCC 12 deletes the builtin inside a plain inline helper called from Highway's
// target code.
__attribute__((always_inline)) inline void FetchLine(const void* p) { __builtin_prefetch(p, 0, 1); }

}  // namespace kvsketch::simd

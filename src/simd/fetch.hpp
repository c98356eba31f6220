// Software prefetch for the kernels that stream rows from memory.
#pragma once

namespace kvsketch::simd {

// Asks for the cache line at p into L2 (prefetcht2 on x86). Not into L1: on Zen 4 a T0 prefetch
// holds one of the core's few L1 miss buffers for the whole memory latency, which capped one core
// near 13 GB/s in the fp16 kernels; to L2, the same requests let it read 18 GB/s and more
// (docs/RESULTS.md, "Prefetching to L2").
__attribute__((always_inline)) inline void FetchLine(const void* p) { __builtin_prefetch(p, 0, 1); }

}  // namespace kvsketch::simd

// Software prefetch for the kernels that stream rows from memory.
#pragma once

namespace kvsketch::simd {

// Asks for the cache line at p into L2 (prefetcht2 on x86). Not into L1: on Zen 4 the fp16 scores
// stalled on their prefetcht0 requests (23% of a profile's samples, 13% with these), and with
// these and the row kernels' fetch schedule the fp16 decode step reads 56-61% of one core's
// bandwidth instead of 42% (docs/history/decode-speed.md, "Prefetching into L2").
// always_inline: GCC 12 deletes the builtin inside a plain inline helper called from Highway's
// target code.
__attribute__((always_inline)) inline void FetchLine(const void* p) { __builtin_prefetch(p, 0, 1); }

}  // namespace kvsketch::simd

// What both caches do with the fp16 rows of sinks and windows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsketch {

// Refuses what an fp16 cache cannot hold (NaN, Inf, |x| > 65504) in x ([kv_heads][tokens][dim]),
// naming layer, head, token, position and channel; `what` is "keys" or "values".
void check_half_range(const float* x, size_t layer, size_t kv_heads, size_t tokens, size_t first_position, size_t dim,
                      const char* what);

// Tokens converted and moved through the window at a time by a long append: a long prefill
// passes through the window in chunks, as if streamed (which gives the same codes), so the window
// and the float copy that encoding reads stay small.
inline constexpr size_t kAppendChunk = 2048;

// Appends `count` floats to `out` as fp16.
void append_halves(std::vector<uint16_t>& out, const float* rows, size_t count);

// Gives back the capacity a long append left in a window vector: where it holds more than twice
// `steady` values (what one-token appends ever need) and its contents fit in `steady`, it is
// reallocated at `steady`. Keeps allocated_bytes() and the process's memory near bytes().
void trim_window_capacity(std::vector<uint16_t>& window, size_t steady);

// `count` fp16 values from `in` as floats, written to `out`.
void halves_to_floats(const uint16_t* in, size_t count, float* out);

}  // namespace kvsketch

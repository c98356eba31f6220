// The sizes the library accepts, in one place: the API checks them and refuses larger requests
// with an Error naming the argument, so that no input can make it allocate or work without bound.
#pragma once
#include <cstddef>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

// The largest vector a codec, a KV cache head, a selector or an index takes.
inline constexpr size_t kMaxDim = 8192;
// rotation=haar builds a dense dim x dim rotation per codec (O(dim^3) work, 4 dim^2 bytes), and an
// orthogonal sketch orthogonalizes dim x dim blocks: both are offered up to this dimension, the
// randomized Hadamard at any.
inline constexpr size_t kMaxHaarDim = 2048;
// Thread counts (0 meaning all of OpenMP's threads) in options and on the command line.
inline constexpr int kMaxThreads = 1024;

}  // namespace kvsketch
#pragma GCC visibility pop

// The decode kernels' bodies (cuda/decode_body.cuh) run on the CPU: one host thread per CUDA
// thread of a block, the block's and each warp's barriers, and a warp's shuffles and
// mma.m16n8k16 through slots that every lane fills before any lane reads them (the PTX ISA's
// fragment layouts). Slow (thousands of barrier crossings a block) but the kernels' own code: the
// online softmax, the warps' merge, the split of tokens over blocks and the finish.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "cuda/decode_body.cuh"
#include "kvsketch/half.hpp"

namespace kvsketch::cuda::emulator {

using detail::kThreads;
using detail::kWarps;

class Barrier {
 public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const long generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      released_.notify_all();
      return;
    }
    released_.wait(lock, [&] { return generation != generation_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable released_;
  const int count_;
  int waiting_ = 0;
  long generation_ = 0;
};

struct Warp {
  Barrier barrier{32};
  float values[32];
  uint32_t a[32][4], b[32][2];
};

struct Block {
  Barrier barrier{kThreads};
  Warp warps[kWarps];
  int x = 0, y = 0, z = 0;
};

// The Context of decode_body and finish for one emulated thread.
struct HostContext {
  static constexpr bool kLanesApart = true;
  Block* block;
  int tid;

  int thread() const { return tid; }
  int block_x() const { return block->x; }
  int block_y() const { return block->y; }
  int block_z() const { return block->z; }
  Warp& warp() const { return block->warps[tid / 32]; }
  void sync_block() const { block->barrier.wait(); }
  void sync_warp() const { warp().barrier.wait(); }
  float shfl_xor(float value, int mask) const {
    Warp& w = warp();
    const int lane = tid % 32;
    w.values[lane] = value;
    sync_warp();
    const float other = w.values[lane ^ mask];
    sync_warp();
    return other;
  }
  // D += A B for the warp: thread 4g + c holds A rows g, g + 8 and columns 2c, 2c + 1 (+ 8), B rows
  // 2c, 2c + 1 (+ 8) of column g, and D rows g, g + 8 of columns 2c, 2c + 1.
  void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    Warp& w = warp();
    const int lane = tid % 32, g = lane / 4, c = lane % 4;
    for (int r = 0; r < 4; ++r) w.a[lane][r] = a[r];
    w.b[lane][0] = b0, w.b[lane][1] = b1;
    sync_warp();
    const auto half_of = [](uint32_t pair, int which) {
      return half_to_float(static_cast<uint16_t>(which ? pair >> 16 : pair & 0xffff));
    };
    for (int r = 0; r < 4; ++r) {
      const int row = g + 8 * (r / 2), column = 2 * c + r % 2;
      double sum = 0.0;
      for (int k = 0; k < 16; ++k) {
        const float x = half_of(w.a[4 * (row % 8) + (k % 8) / 2][row / 8 + 2 * (k / 8)], k % 2);
        const float y = half_of(w.b[4 * column + (k % 8) / 2][k / 8], k % 2);
        sum += static_cast<double>(x) * y;
      }
      d[r] += static_cast<float>(sum);
    }
    sync_warp();
  }
};

// Runs body(context) on kThreads host threads as block (x, y, z).
template <typename Body>
void run_block(int x, int y, int z, Body&& body) {
  auto block = std::make_unique<Block>();
  block->x = x, block->y = y, block->z = z;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      HostContext context{block.get(), t};
      body(context);
    });
  for (auto& thread : threads) thread.join();
}

// launch_decode's grid, block by block: the body's units, then the finish per query head.
template <int D, int KB, int VB, bool SIGNS>
void decode(const detail::DecodeShape& shape, const detail::BodyView& body, const detail::BatchView& batch,
            const float* queries, float* output, float* lse) {
  const detail::Split split = detail::split_of(shape, batch);
  std::vector<float> partials(detail::decode_workspace_floats(shape, batch));
  for (int z = 0; z < batch.batch; ++z)
    for (int y = 0; y < shape.kv_heads; ++y)
      for (int x = 0; x < split.units; ++x) {
        std::vector<float> shared(detail::decode_body_shared_floats<D, SIGNS>());
        run_block(x, y, z, [&](HostContext& context) {
          detail::decode_body<D, KB, VB, SIGNS>(context, shared.data(), shape, body, batch, queries, partials.data(),
                                                split.tokens_per_unit, split.units);
        });
      }
  for (int z = 0; z < batch.batch; ++z)
    for (int y = 0; y < shape.kv_heads; ++y)
      for (int x = 0; x < shape.group; ++x) {
        auto shared = std::make_unique<detail::FinishShared<D>>();
        run_block(x, y, z, [&](HostContext& context) {
          detail::finish<D>(context, *shared, shape, body, batch, queries, partials.data(), split.units, output, lse);
        });
      }
}

}  // namespace kvsketch::cuda::emulator

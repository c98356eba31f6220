#include "core/kernel_memory.hpp"

#include <cstdlib>

namespace kvsketch {
namespace {

constexpr size_t kClasses = 48;      // 64 B << 47: beyond any size_t a call asks for
constexpr size_t kKeptPerClass = 64;  // blocks a thread keeps per class; more are freed

struct FreeBlock {
  FreeBlock* next;
};

size_t size_class(size_t bytes) {
  size_t c = 0;
  while ((size_t{64} << c) < bytes) ++c;
  return c;
}

// A thread's free lists, linked through the free blocks themselves (no bookkeeping allocations).
struct FreeLists {
  FreeBlock* head[kClasses] = {};
  size_t kept[kClasses] = {};
  ~FreeLists() {
    for (size_t c = 0; c < kClasses; ++c)
      while (head[c]) {
        FreeBlock* block = head[c];
        head[c] = block->next;
        std::free(block);
      }
  }
};

FreeLists& lists() {
  thread_local FreeLists thread_lists;
  return thread_lists;
}

}  // namespace

void* kernel_allocate(size_t bytes) {
  const size_t c = size_class(bytes == 0 ? 1 : bytes);
  if (c >= kClasses) throw std::bad_alloc();
  FreeLists& free = lists();
  if (FreeBlock* block = free.head[c]) {
    free.head[c] = block->next;
    --free.kept[c];
    return block;
  }
  void* memory = std::aligned_alloc(64, size_t{64} << c);
  if (!memory) throw std::bad_alloc();
  return memory;
}

void kernel_free(void* memory, size_t bytes) noexcept {
  if (!memory) return;
  const size_t c = size_class(bytes == 0 ? 1 : bytes);
  FreeLists& free = lists();
  if (free.kept[c] >= kKeptPerClass) {
    std::free(memory);
    return;
  }
  auto* block = static_cast<FreeBlock*>(memory);
  block->next = free.head[c];
  free.head[c] = block;
  ++free.kept[c];
}

}  // namespace kvsketch

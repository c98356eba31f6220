// Memory of the decode kernels' per-call state (score and accumulator states, lane tables, block
// buffers), kept per thread: what a call frees goes to its thread's free lists by size class, and
// the next call takes it from there, so that a warm decode step allocates nothing. States live
// within one kernel call on one thread; memory freed on another thread joins that thread's lists.
// A thread's lists are freed when it exits.
//
//   KernelVector<float> logits(heads * rows);           // as std::vector
//   KernelArray<float> sums = kernel_array<float>(n);   // 64-byte aligned, uninitialized
//   KernelPointer<State> state = kernel_new<State>(args...);
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace kvsketch {

// Blocks of 64 bytes << c for size class c, aligned to 64 bytes.
void* kernel_allocate(size_t bytes);
void kernel_free(void* memory, size_t bytes) noexcept;

template <class T>
struct KernelAllocator {
  using value_type = T;
  KernelAllocator() = default;
  template <class U>
  KernelAllocator(const KernelAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(kernel_allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept { kernel_free(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const KernelAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using KernelVector = std::vector<T, KernelAllocator<T>>;

// n elements of a trivial type, 64-byte aligned, not initialized.
template <class T>
struct KernelArrayDeleter {
  size_t bytes = 0;
  void operator()(T* p) const noexcept { kernel_free(p, bytes); }
};
template <class T>
using KernelArray = std::unique_ptr<T[], KernelArrayDeleter<T>>;
template <class T>
KernelArray<T> kernel_array(size_t n) {
  static_assert(std::is_trivially_destructible_v<T>);
  const size_t bytes = n * sizeof(T);
  return KernelArray<T>(static_cast<T*>(kernel_allocate(bytes)), KernelArrayDeleter<T>{bytes});
}

// One object in kernel memory.
template <class T>
struct KernelObjectDeleter {
  void operator()(T* p) const noexcept {
    p->~T();
    kernel_free(p, sizeof(T));
  }
};
template <class T>
using KernelPointer = std::unique_ptr<T, KernelObjectDeleter<T>>;
template <class T, class... Args>
KernelPointer<T> kernel_new(Args&&... args) {
  static_assert(alignof(T) <= 64);
  void* memory = kernel_allocate(sizeof(T));
  try {
    return KernelPointer<T>(::new (memory) T(std::forward<Args>(args)...));
  } catch (...) {
    kernel_free(memory, sizeof(T));
    throw;
  }
}

}  // namespace kvsketch

// An allocator whose value-less construct() default-initializes: resize() of a vector of bytes
// leaves the new bytes as they are instead of writing zeros first, for arrays that are written in
// full right after growing (an index's codes: a zero fill would be one more pass over them).
#pragma once
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace kvsketch {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  using std::allocator<T>::allocator;

  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    std::allocator_traits<std::allocator<T>>::construct(static_cast<std::allocator<T>&>(*this), p,
                                                        std::forward<Args>(args)...);
  }
};

// Bytes that resize() does not zero.
using UninitializedBytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

}  // namespace kvsketch

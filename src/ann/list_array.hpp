// An array that an index's list holds: its own vector, or, in an index mapped from its file
// (IvfIndex::map), a view of the file's pages, copied into its own vector the first time the list
// changes. Reading goes through data(), size() and operator[]; changing through mutate().
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

namespace kvsketch {

template <typename T, typename Allocator = std::allocator<T>>
class ListArray {
 public:
  using Vector = std::vector<T, Allocator>;

  size_t size() const { return view_ ? view_size_ : owned_.size(); }
  bool empty() const { return size() == 0; }
  const T* data() const { return view_ ? view_ : owned_.data(); }
  const T& operator[](size_t i) const { return data()[i]; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size(); }
  bool mapped() const { return view_ != nullptr; }

  // The own vector, to change; a view is copied into it first.
  Vector& mutate() {
    if (view_) {
      owned_.assign(view_, view_ + view_size_);
      view_ = nullptr;
      view_size_ = 0;
    }
    return owned_;
  }
  // Reads n values at data from now on (memory that outlives this array; not written through).
  void view(const T* data, size_t n) {
    owned_ = Vector();
    view_ = n ? data : nullptr;
    view_size_ = n;
  }

 private:
  Vector owned_;
  const T* view_ = nullptr;
  size_t view_size_ = 0;
};

}  // namespace kvsketch

// The verbs the C ABI's flat and IVF indexes share: each checks its handle and pointers and calls
// the index.
#pragma once
#include <algorithm>

#include "capi/capi_support.hpp"

namespace kvsketch::capi {

template <typename Handle>
kvs_status index_add(Handle* index, const float* x, size_t n, const int64_t* ids) {
  return guarded([&] {
    auto& i = handle(index, "index");
    require_pointer(x, "x");
    product(n, i.index.dim(), "n x dim");
    i.index.add(x, n, ids);
  });
}

// search(queries, nq) gives the Neighbors, copied into ids and scores (nq x k).
template <typename Handle, typename Search>
kvs_status index_search(const Handle* index, const float* queries, size_t nq, size_t k, int64_t* ids, float* scores,
                        Search&& search) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(queries, "queries");
    require_pointer(ids, "ids");
    require_pointer(scores, "scores");
    product(nq, i.index.dim(), "nq x dim");
    product(nq, k, "nq x k");
    const Neighbors found = search(i.index, queries, nq);
    std::copy(found.ids.begin(), found.ids.end(), ids);
    std::copy(found.scores.begin(), found.scores.end(), scores);
  });
}

template <typename Handle>
kvs_status index_remove(Handle* index, const int64_t* ids, size_t n, size_t* removed) {
  return guarded([&] {
    auto& i = handle(index, "index");
    require_pointer(ids, "ids");
    const size_t count = i.index.remove(ids, n);
    if (removed) *removed = count;
  });
}

template <typename Handle>
kvs_status index_sizes(const Handle* index, size_t* out, bool bytes) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(out, bytes ? "bytes" : "size");
    *out = bytes ? i.index.bytes() : i.index.size();
  });
}

template <typename Handle>
kvs_status index_save(const Handle* index, const char* path) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(path, "path");
    i.index.save(path);
  });
}

}  // namespace kvsketch::capi

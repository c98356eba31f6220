// The C ABI's IVF index.
#include <algorithm>
#include <string>

#include "capi/capi_index_verbs.hpp"

using namespace kvsketch::capi;

extern "C" {

kvs_status kvs_ivf_index_create(size_t dim, const char* factory, int threads, kvs_ivf_index** index) {
  return guarded([&] {
    require_pointer(factory, "factory");
    require_pointer(index, "index");
    *index = nullptr;
    require_argument(threads >= 0, "threads is " + std::to_string(threads) + "; 0 or more");
    kvsketch::IvfIndexOptions options = kvsketch::IvfIndexOptions::parse(factory);
    options.threads = threads;
    auto made = std::unique_ptr<kvs_ivf_index>(new kvs_ivf_index{kvsketch::IvfIndex(dim, options)});
    *index = Registry<kvs_ivf_index>::adopt(std::move(made));
  });
}

void kvs_ivf_index_destroy(kvs_ivf_index* index) {
  if (index) Registry<kvs_ivf_index>::release(index);
}

kvs_status kvs_ivf_index_train(kvs_ivf_index* index, const float* x, size_t n) {
  return guarded([&] {
    auto& i = handle(index, "index");
    require_pointer(x, "x");
    product(n, i.index.dim(), "n x dim");
    i.index.train(x, n);
  });
}

kvs_status kvs_ivf_index_add(kvs_ivf_index* index, const float* x, size_t n, const int64_t* ids) {
  return index_add(index, x, n, ids);
}

kvs_status kvs_ivf_index_search(const kvs_ivf_index* index, const float* queries, size_t nq, size_t k, size_t nprobe,
                                int64_t* ids, float* scores) {
  return index_search(
      index, queries, nq, k, ids, scores,
      [&](const kvsketch::IvfIndex& ivf, const float* q, size_t count) { return ivf.search(q, count, k, nprobe); });
}

kvs_status kvs_ivf_index_remove(kvs_ivf_index* index, const int64_t* ids, size_t n, size_t* removed) {
  return index_remove(index, ids, n, removed);
}

kvs_status kvs_ivf_index_size(const kvs_ivf_index* index, size_t* size) { return index_sizes(index, size, false); }

kvs_status kvs_ivf_index_bytes(const kvs_ivf_index* index, size_t* bytes) { return index_sizes(index, bytes, true); }

kvs_status kvs_ivf_index_save(const kvs_ivf_index* index, const char* path) { return index_save(index, path); }

kvs_status kvs_ivf_index_load(const char* path, kvs_ivf_index** index) {
  return load_handle(path, index, "index", [](const char* file) { return kvsketch::IvfIndex::load(file); });
}

kvs_status kvs_ivf_index_map(const char* path, kvs_ivf_index** index) {
  return load_handle(path, index, "index", [](const char* file) { return kvsketch::IvfIndex::map(file); });
}

}  // extern "C"

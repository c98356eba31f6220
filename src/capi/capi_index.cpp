// The C ABI's flat vector index.
#include <algorithm>
#include <string>

#include "capi/capi_index_verbs.hpp"

using namespace kvsketch::capi;

extern "C" {

kvs_index_params kvs_index_default_params(void) {
  kvs_index_params params;
  params.size = sizeof(kvs_index_params);
  params.codec = "tq_pca:b=4";
  params.metric = "ip";
  params.seed = 0;
  params.threads = 0;
  return params;
}

kvs_status kvs_index_create(size_t dim, const kvs_index_params* given, kvs_index** index) {
  return guarded([&] {
    require_pointer(index, "index");
    *index = nullptr;
    const kvs_index_params params = read_params(given, kvs_index_default_params(), "params");
    require_pointer(params.codec, "params->codec");
    require_pointer(params.metric, "params->metric");
    require_argument(params.threads >= 0, "params->threads is " + std::to_string(params.threads) + "; 0 or more");
    kvsketch::FlatIndexOptions options;
    options.codec = params.codec;
    options.metric = kvsketch::parse_metric(params.metric);
    options.seed = params.seed;
    options.threads = params.threads;
    auto made = std::unique_ptr<kvs_index>(new kvs_index{kvsketch::FlatIndex(dim, options)});
    *index = Registry<kvs_index>::adopt(std::move(made));
  });
}

void kvs_index_destroy(kvs_index* index) {
  if (index) Registry<kvs_index>::release(index);
}

kvs_status kvs_index_add(kvs_index* index, const float* x, size_t n, const int64_t* ids) {
  return index_add(index, x, n, ids);
}

kvs_status kvs_index_search(const kvs_index* index, const float* queries, size_t nq, size_t k, int64_t* ids,
                            float* scores) {
  return index_search(
      index, queries, nq, k, ids, scores,
      [&](const kvsketch::FlatIndex& flat, const float* q, size_t count) { return flat.search(q, count, k); });
}

kvs_status kvs_index_remove(kvs_index* index, const int64_t* ids, size_t n, size_t* removed) {
  return index_remove(index, ids, n, removed);
}

kvs_status kvs_index_size(const kvs_index* index, size_t* size) { return index_sizes(index, size, false); }

kvs_status kvs_index_bytes(const kvs_index* index, size_t* bytes) { return index_sizes(index, bytes, true); }

kvs_status kvs_index_save(const kvs_index* index, const char* path) { return index_save(index, path); }

kvs_status kvs_index_load(const char* path, kvs_index** index) {
  return load_handle(path, index, "index", [](const char* file) { return kvsketch::FlatIndex::load(file); });
}

}  // extern "C"

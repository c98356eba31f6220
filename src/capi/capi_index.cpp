// The C ABI's flat vector index.
#include <algorithm>
#include <string>

#include "capi/capi_support.hpp"

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
  return guarded([&] {
    auto& i = handle(index, "index");
    require_pointer(x, "x");
    product(n, i.index.dim(), "n x dim");
    i.index.add(x, n, ids);
  });
}

kvs_status kvs_index_search(const kvs_index* index, const float* queries, size_t nq, size_t k, int64_t* ids,
                            float* scores) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(queries, "queries");
    require_pointer(ids, "ids");
    require_pointer(scores, "scores");
    product(nq, i.index.dim(), "nq x dim");
    product(nq, k, "nq x k");
    const kvsketch::Neighbors found = i.index.search(queries, nq, k);
    std::copy(found.ids.begin(), found.ids.end(), ids);
    std::copy(found.scores.begin(), found.scores.end(), scores);
  });
}

kvs_status kvs_index_remove(kvs_index* index, const int64_t* ids, size_t n, size_t* removed) {
  return guarded([&] {
    auto& i = handle(index, "index");
    require_pointer(ids, "ids");
    const size_t count = i.index.remove(ids, n);
    if (removed) *removed = count;
  });
}

kvs_status kvs_index_size(const kvs_index* index, size_t* size) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(size, "size");
    *size = i.index.size();
  });
}

kvs_status kvs_index_bytes(const kvs_index* index, size_t* bytes) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(bytes, "bytes");
    *bytes = i.index.bytes();
  });
}

kvs_status kvs_index_save(const kvs_index* index, const char* path) {
  return guarded([&] {
    const auto& i = handle(index, "index");
    require_pointer(path, "path");
    i.index.save(path);
  });
}

kvs_status kvs_index_load(const char* path, kvs_index** index) {
  return guarded([&] {
    require_pointer(path, "path");
    require_pointer(index, "index");
    *index = nullptr;
    auto made = std::unique_ptr<kvs_index>(new kvs_index{kvsketch::FlatIndex::load(path)});
    *index = Registry<kvs_index>::adopt(std::move(made));
  });
}

}  // extern "C"

// The verbs the C ABI's paged cache and paged selection cache share: sequences and appends. Each
// checks its handle and pointers and calls the cache (Handle::cache: PagedKVCache or
// PagedSelectionCache); `shape` gives the PagedKVCache whose kv_heads and head_dim size an append.
#pragma once
#include <vector>

#include "capi/capi_support.hpp"

namespace kvsketch::capi {

template <typename Handle>
kvs_status sequence_add(Handle* cache, uint64_t* sequence) {
  return guarded([&] {
    auto& c = handle(cache, "cache");
    require_pointer(sequence, "sequence");
    *sequence = c.cache.add_sequence();
  });
}

template <typename Handle>
kvs_status sequence_fork(Handle* cache, uint64_t source, uint64_t* sequence) {
  return guarded([&] {
    auto& c = handle(cache, "cache");
    require_pointer(sequence, "sequence");
    *sequence = c.cache.fork(source);
  });
}

template <typename Handle>
kvs_status sequence_truncate(Handle* cache, uint64_t sequence, size_t tokens) {
  return guarded([&] { handle(cache, "cache").cache.truncate(sequence, tokens); });
}

template <typename Handle>
kvs_status sequence_remove(Handle* cache, uint64_t sequence) {
  return guarded([&] { handle(cache, "cache").cache.remove_sequence(sequence); });
}

// A chunk's keys and values of `dtype`, [kv_heads][tokens][head_dim] each for `kv`'s shape, as
// floats: the caller's memory where they are float32, else converted into `storage`.
struct KeyValueFloats {
  std::vector<float> key_storage, value_storage;
  const float* keys = nullptr;
  const float* values = nullptr;
};

inline void key_value_floats(const PagedKVCache& kv, kvs_dtype dtype, const void* keys, const void* values,
                             size_t tokens, KeyValueFloats& out) {
  require_pointer(keys, "keys");
  require_pointer(values, "values");
  const size_t count = product(product(kv.kv_heads(), tokens, "kv_heads x tokens"), kv.head_dim(),
                               "kv_heads x tokens x head_dim");
  out.keys = as_floats(dtype, keys, count, out.key_storage);
  out.values = as_floats(dtype, values, count, out.value_storage);
}

// Keys and values of `dtype`, [kv_heads][tokens][head_dim] each, appended to a sequence's layer.
template <typename Handle, typename Shape>
kvs_status sequence_append(Handle* cache, uint64_t sequence, size_t layer, kvs_dtype dtype, const void* keys,
                           const void* values, size_t tokens, Shape&& shape) {
  return guarded([&] {
    auto& c = handle(cache, "cache");
    KeyValueFloats rows;
    key_value_floats(shape(c.cache), dtype, keys, values, tokens, rows);
    c.cache.append(sequence, layer, rows.keys, rows.values, tokens);
  });
}

}  // namespace kvsketch::capi

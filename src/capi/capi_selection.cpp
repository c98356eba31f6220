// The C ABI's selection caches: one sequence, or the sequences of a paged cache, attended through
// token selectors.
#include <set>
#include <string>
#include <vector>

#include "capi/capi_sequence_verbs.hpp"
#include "capi/capi_support.hpp"
#include "kvsketch/kv_policy.hpp"

using namespace kvsketch::capi;

extern "C" {

kvs_selection_params kvs_selection_default_params(void) {
  kvs_selection_params params;
  params.size = sizeof(kvs_selection_params);
  params.layers = 1;
  params.kv_heads = 1;
  params.head_dim = 128;
  params.policy = "tq_prod:b=3|tq_mse:b=3";
  params.selector = "magicpig:K=10,L=150";
  params.dense_layers = nullptr;
  params.dense_count = 0;
  params.seed = 0;
  return params;
}

}  // extern "C"

namespace {

// A selection cache of either kind (Cache: SelectionCache or PagedSelectionCache) from checked
// parameters, adopted as a handle into *out.
template <typename Handle, typename Cache>
void create_selection(const kvs_selection_params* given, Handle** out) {
  require_pointer(out, "cache");
  *out = nullptr;
  const kvs_selection_params params = read_params(given, kvs_selection_default_params(), "params");
  require_pointer(params.policy, "params->policy");
  require_pointer(params.selector, "params->selector");
  require_argument(params.dense_count == 0 || params.dense_layers != nullptr,
                   "params->dense_layers is NULL with params->dense_count " + std::to_string(params.dense_count));
  std::set<size_t> dense;
  for (size_t i = 0; i < params.dense_count; ++i) {
    require_argument(params.dense_layers[i] < params.layers,
                     "params->dense_layers[" + std::to_string(i) + "] is " + std::to_string(params.dense_layers[i]) +
                         "; the cache has " + std::to_string(params.layers) + " layers");
    dense.insert(params.dense_layers[i]);
  }
  std::unique_ptr<Handle> made(new Handle{Cache(params.layers, params.kv_heads, params.head_dim,
                                                kvsketch::KVPolicy::parse(params.policy), params.selector, dense,
                                                params.seed)});
  *out = Registry<Handle>::adopt(std::move(made));
}

}  // namespace

extern "C" {

kvs_status kvs_selection_cache_create(const kvs_selection_params* given, kvs_selection_cache** cache) {
  return guarded([&] { create_selection<kvs_selection_cache, kvsketch::SelectionCache>(given, cache); });
}

void kvs_selection_cache_destroy(kvs_selection_cache* cache) {
  if (cache) Registry<kvs_selection_cache>::release(cache);
}

kvs_status kvs_selection_cache_append(kvs_selection_cache* cache, size_t layer, kvs_dtype dtype, const void* keys,
                                      const void* values, size_t tokens) {
  return guarded([&] {
    auto& c = handle(cache, "cache");
    require_pointer(keys, "keys");
    require_pointer(values, "values");
    const kvsketch::KVCache& kv = c.cache.cache();
    const size_t count = product(product(kv.kv_heads(), tokens, "kv_heads x tokens"), kv.head_dim(),
                                 "kv_heads x tokens x head_dim");
    std::vector<float> key_storage, value_storage;
    c.cache.append(layer, as_floats(dtype, keys, count, key_storage), as_floats(dtype, values, count, value_storage),
                   tokens);
  });
}

kvs_status kvs_selection_cache_attention(const kvs_selection_cache* cache, size_t layer, const float* queries,
                                         size_t q_heads, uint64_t draw, float* output, float* lse) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(queries, "queries");
    require_pointer(output, "output");
    product(q_heads, c.cache.cache().head_dim(), "q_heads x head_dim");
    const kvsketch::AttentionResult result = c.cache.attention(layer, queries, q_heads, draw);
    std::copy(result.output.begin(), result.output.end(), output);
    if (lse) std::copy(result.lse.begin(), result.lse.end(), lse);
  });
}

kvs_status kvs_selection_cache_tokens(const kvs_selection_cache* cache, size_t layer, size_t* tokens) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(tokens, "tokens");
    *tokens = c.cache.cache().tokens(layer);
  });
}

kvs_status kvs_selection_cache_bytes(const kvs_selection_cache* cache, size_t* kv_bytes, size_t* index_bytes) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    if (kv_bytes) *kv_bytes = c.cache.cache().bytes();
    if (index_bytes) *index_bytes = c.cache.index_bytes();
  });
}

kvs_status kvs_paged_selection_create(const kvs_selection_params* given, kvs_paged_selection** cache) {
  return guarded([&] { create_selection<kvs_paged_selection, kvsketch::PagedSelectionCache>(given, cache); });
}

void kvs_paged_selection_destroy(kvs_paged_selection* cache) {
  if (cache) Registry<kvs_paged_selection>::release(cache);
}

kvs_status kvs_paged_selection_add_sequence(kvs_paged_selection* cache, uint64_t* sequence) {
  return sequence_add(cache, sequence);
}

kvs_status kvs_paged_selection_fork(kvs_paged_selection* cache, uint64_t source, uint64_t* sequence) {
  return sequence_fork(cache, source, sequence);
}

kvs_status kvs_paged_selection_truncate(kvs_paged_selection* cache, uint64_t sequence, size_t tokens) {
  return sequence_truncate(cache, sequence, tokens);
}

kvs_status kvs_paged_selection_remove_sequence(kvs_paged_selection* cache, uint64_t sequence) {
  return sequence_remove(cache, sequence);
}

kvs_status kvs_paged_selection_append(kvs_paged_selection* cache, uint64_t sequence, size_t layer, kvs_dtype dtype,
                                      const void* keys, const void* values, size_t tokens) {
  return sequence_append(cache, sequence, layer, dtype, keys, values, tokens,
                         [](const kvsketch::PagedSelectionCache& c) -> const kvsketch::PagedKVCache& {
                           return c.cache();
                         });
}

kvs_status kvs_paged_selection_attention(const kvs_paged_selection* cache, size_t layer, const uint64_t* sequences,
                                         size_t batch, const float* queries, size_t q_heads, uint64_t draw,
                                         float* output, float* lse) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(sequences, "sequences");
    require_pointer(queries, "queries");
    require_pointer(output, "output");
    product(product(batch, q_heads, "batch x q_heads"), c.cache.cache().head_dim(), "batch x q_heads x head_dim");
    c.cache.attention(layer, sequences, batch, queries, q_heads, output, lse, draw);
  });
}

kvs_status kvs_paged_selection_tokens(const kvs_paged_selection* cache, uint64_t sequence, size_t layer,
                                      size_t* tokens, size_t* indexed) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    const size_t held = c.cache.cache().tokens(sequence, layer), in_index = c.cache.indexed_tokens(sequence, layer);
    if (tokens) *tokens = held;
    if (indexed) *indexed = in_index;
  });
}

kvs_status kvs_paged_selection_bytes(const kvs_paged_selection* cache, size_t* kv_bytes, size_t* index_bytes) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    if (kv_bytes) *kv_bytes = c.cache.cache().bytes();
    if (index_bytes) *index_bytes = c.cache.index_bytes();
  });
}

}  // extern "C"

// The C ABI's calibration and paged cache.
#include <string>
#include <vector>

#include "capi/capi_sequence_verbs.hpp"
#include "capi/capi_support.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_policy.hpp"

using namespace kvsketch::capi;

namespace {

kvsketch::AttentionOptions options_of(const kvs_attention_params* given) {
  const kvs_attention_params params = read_params(given, kvs_attention_default_params(), "params");
  require_argument(params.threads >= 0, "params->threads is " + std::to_string(params.threads) + "; 0 or more");
  require_argument(params.integer_arithmetic == 0 || params.integer_arithmetic == 1,
                   "params->integer_arithmetic is " + std::to_string(params.integer_arithmetic) + "; 0 or 1");
  kvsketch::AttentionOptions options;
  options.threads = params.threads;
  options.arithmetic = params.integer_arithmetic ? kvsketch::Arithmetic::kInteger : kvsketch::Arithmetic::kFloat;
  return options;
}

}  // namespace

extern "C" {

kvs_cache_params kvs_cache_default_params(void) {
  kvs_cache_params params;
  params.size = sizeof(kvs_cache_params);
  params.layers = 1;
  params.kv_heads = 1;
  params.head_dim = 128;
  params.policy = "tq_prod:b=3|tq_mse:b=3";
  params.seed = 0;
  params.calibration = nullptr;
  return params;
}

kvs_attention_params kvs_attention_default_params(void) {
  kvs_attention_params params;
  params.size = sizeof(kvs_attention_params);
  params.threads = 0;
  params.integer_arithmetic = 1;
  return params;
}

kvs_status kvs_calibration_create(size_t layers, size_t kv_heads, size_t head_dim, const char* policy, uint64_t seed,
                                  kvs_calibration** calibration) {
  return guarded([&] {
    require_pointer(policy, "policy");
    require_pointer(calibration, "calibration");
    *calibration = nullptr;
    auto made = std::unique_ptr<kvs_calibration>(
        new kvs_calibration{kvsketch::Calibration(layers, kv_heads, head_dim, kvsketch::KVPolicy::parse(policy), seed)});
    *calibration = Registry<kvs_calibration>::adopt(std::move(made));
  });
}

void kvs_calibration_destroy(kvs_calibration* calibration) {
  if (calibration) Registry<kvs_calibration>::release(calibration);
}

kvs_status kvs_calibration_fit(kvs_calibration* calibration, size_t layer, const float* keys, const float* values,
                               size_t tokens) {
  return guarded([&] {
    auto& c = handle(calibration, "calibration");
    require_pointer(keys, "keys");
    require_pointer(values, "values");
    product(product(c.calibration.kv_heads(), tokens, "kv_heads x tokens"), c.calibration.head_dim(),
            "kv_heads x tokens x head_dim");
    c.calibration.fit(layer, keys, values, tokens);
  });
}

kvs_status kvs_calibration_complete(const kvs_calibration* calibration, int* complete) {
  return guarded([&] {
    const auto& c = handle(calibration, "calibration");
    require_pointer(complete, "complete");
    *complete = c.calibration.complete() ? 1 : 0;
  });
}

kvs_status kvs_calibration_save(const kvs_calibration* calibration, const char* path) {
  return guarded([&] {
    const auto& c = handle(calibration, "calibration");
    require_pointer(path, "path");
    c.calibration.save(path);
  });
}

kvs_status kvs_calibration_load(const char* path, kvs_calibration** calibration) {
  return load_handle(path, calibration, "calibration",
                     [](const char* file) { return kvsketch::Calibration::load(file); });
}

kvs_status kvs_cache_create(const kvs_cache_params* given, kvs_cache** cache) {
  return guarded([&] {
    require_pointer(cache, "cache");
    *cache = nullptr;
    const kvs_cache_params params = read_params(given, kvs_cache_default_params(), "params");
    std::unique_ptr<kvs_cache> made;
    if (params.calibration) {
      const auto& calibration = handle(params.calibration, "params->calibration");
      made.reset(new kvs_cache{kvsketch::PagedKVCache(calibration.calibration)});
    } else {
      require_pointer(params.policy, "params->policy");
      made.reset(new kvs_cache{kvsketch::PagedKVCache(params.layers, params.kv_heads, params.head_dim,
                                                      kvsketch::KVPolicy::parse(params.policy), params.seed)});
    }
    *cache = Registry<kvs_cache>::adopt(std::move(made));
  });
}

void kvs_cache_destroy(kvs_cache* cache) {
  if (cache) Registry<kvs_cache>::release(cache);
}

kvs_status kvs_cache_add_sequence(kvs_cache* cache, uint64_t* sequence) { return sequence_add(cache, sequence); }

kvs_status kvs_cache_fork(kvs_cache* cache, uint64_t source, uint64_t* sequence) {
  return sequence_fork(cache, source, sequence);
}

kvs_status kvs_cache_truncate(kvs_cache* cache, uint64_t sequence, size_t tokens) {
  return sequence_truncate(cache, sequence, tokens);
}

kvs_status kvs_cache_remove_sequence(kvs_cache* cache, uint64_t sequence) { return sequence_remove(cache, sequence); }

kvs_status kvs_cache_tokens(const kvs_cache* cache, uint64_t sequence, size_t layer, size_t* tokens) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(tokens, "tokens");
    *tokens = c.cache.tokens(sequence, layer);
  });
}

kvs_status kvs_cache_append(kvs_cache* cache, uint64_t sequence, size_t layer, kvs_dtype dtype, const void* keys,
                            const void* values, size_t tokens) {
  return sequence_append(cache, sequence, layer, dtype, keys, values, tokens,
                         [](const kvsketch::PagedKVCache& c) -> const kvsketch::PagedKVCache& { return c; });
}

kvs_status kvs_cache_decode(const kvs_cache* cache, size_t layer, const uint64_t* sequences, size_t batch,
                            const float* queries, size_t q_heads, float* output, float* lse,
                            const kvs_attention_params* params) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(sequences, "sequences");
    require_pointer(queries, "queries");
    require_pointer(output, "output");
    product(product(batch, q_heads, "batch x q_heads"), c.cache.head_dim(), "batch x q_heads x head_dim");
    c.cache.decode(layer, sequences, batch, queries, q_heads, output, lse, options_of(params));
  });
}

kvs_status kvs_cache_prefill(const kvs_cache* cache, size_t layer, uint64_t sequence, size_t chunk,
                             const float* queries, size_t q_heads, float* output, float* lse,
                             const kvs_attention_params* params) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(queries, "queries");
    require_pointer(output, "output");
    product(product(chunk, q_heads, "chunk x q_heads"), c.cache.head_dim(), "chunk x q_heads x head_dim");
    c.cache.prefill(layer, sequence, chunk, queries, q_heads, output, lse, options_of(params));
  });
}

kvs_status kvs_cache_attend_chunk(const kvs_cache* cache, size_t layer, uint64_t sequence, size_t chunk,
                                  const float* queries, size_t q_heads, kvs_dtype dtype, const void* keys,
                                  const void* values, float* output, float* lse, const kvs_attention_params* params) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(queries, "queries");
    require_pointer(output, "output");
    product(product(chunk, q_heads, "chunk x q_heads"), c.cache.head_dim(), "chunk x q_heads x head_dim");
    KeyValueFloats rows;
    key_value_floats(c.cache, dtype, keys, values, chunk, rows);
    c.cache.attend_chunk(layer, sequence, chunk, queries, q_heads, rows.keys, rows.values, output, lse,
                         options_of(params));
  });
}

kvs_status kvs_cache_bytes(const kvs_cache* cache, size_t* bytes) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(bytes, "bytes");
    *bytes = c.cache.bytes();
  });
}

kvs_status kvs_cache_sequence_bytes(const kvs_cache* cache, uint64_t sequence, size_t* bytes) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(bytes, "bytes");
    *bytes = c.cache.sequence_bytes(sequence);
  });
}

kvs_status kvs_cache_save(const kvs_cache* cache, const char* path) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(path, "path");
    c.cache.save(path);
  });
}

kvs_status kvs_cache_load(const char* path, kvs_cache** cache) {
  return load_handle(path, cache, "cache", [](const char* file) { return kvsketch::PagedKVCache::load(file); });
}

kvs_status kvs_cache_save_sequence(const kvs_cache* cache, uint64_t sequence, const char* path) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(path, "path");
    c.cache.save_sequence(sequence, path);
  });
}

kvs_status kvs_cache_load_sequence(kvs_cache* cache, const char* path, uint64_t* sequence) {
  return guarded([&] {
    auto& c = handle(cache, "cache");
    require_pointer(path, "path");
    require_pointer(sequence, "sequence");
    *sequence = c.cache.load_sequence(path);
  });
}

kvs_status kvs_cache_calibration(const kvs_cache* cache, kvs_calibration** calibration) {
  return guarded([&] {
    const auto& c = handle(cache, "cache");
    require_pointer(calibration, "calibration");
    *calibration = nullptr;
    auto made = std::unique_ptr<kvs_calibration>(new kvs_calibration{c.cache.calibration()});
    *calibration = Registry<kvs_calibration>::adopt(std::move(made));
  });
}

}  // extern "C"

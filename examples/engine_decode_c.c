/* The decode loop of an engine written in C, through kvsketch's C ABI (kvsketch/kvsketch.h): one
 * cache for the model, a request's prompt appended (as fp16, as the engine holds it) and attended
 * in a chunk, a second sample forked from it, decode steps for both in one call per layer, a
 * rejected draft token rolled back, and the cache saved and loaded.
 *
 *   cc -std=c99 engine_decode_c.c $(pkg-config --cflags-only-I --libs kvsketch) -lm -o engine_decode_c
 * (the package's other Cflags are for the C++ headers). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <kvsketch/kvsketch.h>

enum { kLayers = 4, kKVHeads = 2, kQueryHeads = 8, kHeadDim = 64, kPrompt = 300, kSteps = 16 };

/* Stops the program with the library's message when a call fails. */
static void check(kvs_status status, const char* what) {
  if (status != KVS_OK) {
    fprintf(stderr, "%s failed (%d): %s\n", what, (int)status, kvs_last_error());
    exit(1);
  }
}

/* Stands in for the model: n values as fp16 (1 sign, 5 exponent, 10 mantissa bits) or floats. */
static unsigned long long state = 1;
static float next_value(void) {
  state = state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static uint16_t to_half(float x) { /* exact for the values used here: multiples of 1/1024 in (-1, 1) */
  const int sign = x < 0.0f, units = (int)(fabsf(x) * 1024.0f);
  int exponent = 14, mantissa = units;
  if (units == 0) return (uint16_t)(sign << 15);
  while (mantissa < 1024) mantissa <<= 1, --exponent;
  return (uint16_t)((sign << 15) | ((exponent + 1) << 10) | (mantissa & 1023));
}

int main(void) {
  kvs_cache_params params = kvs_cache_default_params();
  kvs_cache *cache = NULL, *restored = NULL;
  uint64_t sequences[2];
  size_t layer, i, bytes = 0, tokens = 0;
  int step;
  uint16_t* prompt = malloc(kKVHeads * kPrompt * kHeadDim * sizeof(uint16_t));
  float* queries = malloc(2 * kQueryHeads * kHeadDim * sizeof(float));
  float* output = malloc(2 * kQueryHeads * kHeadDim * sizeof(float));
  float* lse = malloc(2 * kQueryHeads * sizeof(float));
  float* token = malloc(kKVHeads * kHeadDim * sizeof(float));

  params.layers = kLayers;
  params.kv_heads = kKVHeads;
  params.head_dim = kHeadDim;
  params.policy = "tq_mse:b=3|sinks=4|window=64|block=32|page=64|rollback=8";
  params.seed = 7;
  check(kvs_cache_create(&params, &cache), "kvs_cache_create");
  check(kvs_cache_add_sequence(cache, &sequences[0]), "kvs_cache_add_sequence");
  for (layer = 0; layer < kLayers; ++layer) {
    for (i = 0; i < (size_t)kKVHeads * kPrompt * kHeadDim; ++i) prompt[i] = to_half(next_value());
    check(kvs_cache_append(cache, sequences[0], layer, KVS_FLOAT16, prompt, prompt, kPrompt), "append the prompt");
  }
  check(kvs_cache_fork(cache, sequences[0], &sequences[1]), "kvs_cache_fork");

  for (step = 0; step < kSteps; ++step)
    for (layer = 0; layer < kLayers; ++layer) {
      int s;
      for (s = 0; s < 2; ++s) {
        for (i = 0; i < (size_t)kKVHeads * kHeadDim; ++i) token[i] = next_value();
        check(kvs_cache_append(cache, sequences[s], layer, KVS_FLOAT32, token, token, 1), "append a token");
      }
      for (i = 0; i < 2 * (size_t)kQueryHeads * kHeadDim; ++i) queries[i] = next_value();
      check(kvs_cache_decode(cache, layer, sequences, 2, queries, kQueryHeads, output, lse, NULL), "decode");
    }
  /* The second sample's last token was a rejected draft. */
  check(kvs_cache_tokens(cache, sequences[1], 0, &tokens), "kvs_cache_tokens");
  check(kvs_cache_truncate(cache, sequences[1], tokens - 1), "kvs_cache_truncate");

  check(kvs_cache_bytes(cache, &bytes), "kvs_cache_bytes");
  printf("2 sequences of %zu and %zu tokens x %d layers: %zu bytes (fp16 would hold %zu)\n", tokens, tokens - 1,
         kLayers, bytes, (size_t)(2 * tokens - 1) * kLayers * kKVHeads * kHeadDim * 2 * 2);
  check(kvs_cache_save(cache, "engine_decode_c.kvp"), "kvs_cache_save");
  check(kvs_cache_load("engine_decode_c.kvp", &restored), "kvs_cache_load");
  check(kvs_cache_decode(restored, 0, sequences, 2, queries, kQueryHeads, output, lse, NULL), "decode after load");
  printf("loaded: decode ok, lse of the first head %.4f\n", lse[0]);
  remove("engine_decode_c.kvp");
  kvs_cache_destroy(restored);
  kvs_cache_destroy(cache);
  free(prompt);
  free(queries);
  free(output);
  free(lse);
  free(token);
  return 0;
}

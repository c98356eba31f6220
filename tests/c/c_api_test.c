/* The C ABI from C99: every function, against exact arithmetic where the answer is known, and a
 * matrix of bad calls that must each return the right status with a message naming the problem
 * and leave the objects unchanged. Built with -std=c99 -Wall -Wextra -Werror -pedantic. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvsketch/kvsketch.h"

static int failures = 0;
static int bad_calls = 0;

#define CHECK(condition)                                                          \
  do {                                                                            \
    if (!(condition)) {                                                           \
      fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #condition); \
      ++failures;                                                                 \
    }                                                                             \
  } while (0)

#define OK(call)                                                                                       \
  do {                                                                                                 \
    kvs_status status_ = (call);                                                                       \
    if (status_ != KVS_OK) {                                                                           \
      fprintf(stderr, "%s:%d: %s returned %d: %s\n", __FILE__, __LINE__, #call, (int)status_, kvs_last_error()); \
      ++failures;                                                                                      \
    }                                                                                                  \
  } while (0)

/* A bad call: the status, and a message that contains `fragment`. */
#define BAD(call, expected, fragment) bad_call((call), (expected), (fragment), #call, __LINE__)

static void bad_call(kvs_status status, kvs_status expected, const char* fragment, const char* text, int line) {
  ++bad_calls;
  if (status != expected || strstr(kvs_last_error(), fragment) == NULL) {
    fprintf(stderr, "c_api_test.c:%d: %s returned %d (expected %d), message '%s' (expected '%s' in it)\n", line, text,
            (int)status, (int)expected, kvs_last_error(), fragment);
    ++failures;
  }
}

/* A deterministic generator of floats in (-1, 1). */
static unsigned long long state = 88172645463325252ULL;
static float uniform(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return (float)((double)(state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}
static void fill(float* x, size_t n) {
  size_t i;
  for (i = 0; i < n; ++i) x[i] = uniform();
}

static double relative_error(const float* got, const float* expected, size_t n) {
  double difference = 0.0, norm = 0.0;
  size_t i;
  for (i = 0; i < n; ++i) {
    difference += ((double)got[i] - expected[i]) * ((double)got[i] - expected[i]);
    norm += (double)expected[i] * expected[i];
  }
  return sqrt(difference / (norm > 0.0 ? norm : 1.0));
}

/* Exact attention of one query over keys/values [tokens][dim] (a head's rows, stride `stride`). */
static void exact_attention(const float* q, const float* keys, const float* values, size_t tokens, size_t dim,
                            size_t stride, float* out, float* lse) {
  double best = -INFINITY, sum = 0.0;
  double* scores = malloc(tokens * sizeof(double));
  size_t t, j;
  for (t = 0; t < tokens; ++t) {
    double dot = 0.0;
    for (j = 0; j < dim; ++j) dot += (double)q[j] * keys[t * stride + j];
    scores[t] = dot / sqrt((double)dim);
    if (scores[t] > best) best = scores[t];
  }
  for (j = 0; j < dim; ++j) out[j] = 0.0f;
  for (t = 0; t < tokens; ++t) sum += exp(scores[t] - best);
  for (t = 0; t < tokens; ++t) {
    const double p = exp(scores[t] - best) / sum;
    for (j = 0; j < dim; ++j) out[j] += (float)(p * values[t * stride + j]);
  }
  *lse = (float)(best + log(sum));
  free(scores);
}

static void test_version(void) {
  CHECK(kvs_abi_version() == KVS_ABI_VERSION);
  CHECK(strcmp(kvs_version(), "0.1.0") == 0);
}

static void test_codec(void) {
  enum { kDim = 64, kRows = 100 };
  kvs_codec* codec = NULL;
  size_t dim = 0, bytes = 0, length = 0, i, j;
  char spec[256];
  float x[kRows * kDim], decoded[kRows * kDim], q[kDim], scores[kRows], weights[kRows], sum[kDim], expected[kDim];
  uint8_t* codes;
  OK(kvs_codec_create("tq_mse:b=4", kDim, 3, &codec));
  OK(kvs_codec_dim(codec, &dim));
  CHECK(dim == kDim);
  OK(kvs_codec_code_bytes(codec, &bytes));
  CHECK(bytes == kDim * 4 / 8 + 2);
  OK(kvs_codec_spec(codec, spec, sizeof spec, &length));
  CHECK(length == strlen(spec) && strncmp(spec, "tq_mse:b=4", 10) == 0);
  fill(x, kRows * kDim);
  codes = malloc(kRows * bytes);
  OK(kvs_codec_encode(codec, x, kRows, codes, kRows * bytes));
  OK(kvs_codec_decode(codec, codes, kRows, decoded));
  /* TurboQuant_mse at 4 bits: relative MSE about 0.009, so a relative error near 0.1. */
  CHECK(relative_error(decoded, x, kRows * kDim) < 0.15);
  fill(q, kDim);
  OK(kvs_codec_scores(codec, q, codes, kRows, scores));
  for (i = 0; i < kRows; ++i) {
    double dot = 0.0;
    for (j = 0; j < kDim; ++j) dot += (double)q[j] * decoded[i * kDim + j];
    CHECK(fabs(scores[i] - dot) < 1e-4 * (1.0 + fabs(dot)));
  }
  fill(weights, kRows);
  for (j = 0; j < kDim; ++j) sum[j] = expected[j] = 0.0f;
  OK(kvs_codec_accumulate(codec, weights, codes, kRows, sum));
  for (i = 0; i < kRows; ++i)
    for (j = 0; j < kDim; ++j) expected[j] += weights[i] * decoded[i * kDim + j];
  CHECK(relative_error(sum, expected, kDim) < 1e-4);
  kvs_codec_destroy(codec);

  BAD(kvs_codec_create(NULL, kDim, 0, &codec), KVS_ERROR_ARGUMENT, "spec is NULL");
  BAD(kvs_codec_create("nope:b=3", kDim, 0, &codec), KVS_ERROR_REFUSED, "nope");
  BAD(kvs_codec_create("tq_mse:b=3", 0, 0, &codec), KVS_ERROR_REFUSED, "dim");
  BAD(kvs_codec_create("tq_mse:b=3", kDim, 0, NULL), KVS_ERROR_ARGUMENT, "codec is NULL");
  OK(kvs_codec_create("tq_mse:b=4", kDim, 3, &codec));
  BAD(kvs_codec_dim(NULL, &dim), KVS_ERROR_ARGUMENT, "codec is NULL");
  BAD(kvs_codec_dim(codec, NULL), KVS_ERROR_ARGUMENT, "dim is NULL");
  BAD(kvs_codec_encode(codec, x, kRows, codes, kRows * bytes - 1), KVS_ERROR_ARGUMENT, "codes_size");
  x[7 * kDim + 5] = NAN;
  BAD(kvs_codec_encode(codec, x, kRows, codes, kRows * bytes), KVS_ERROR_REFUSED, "row 7");
  x[7 * kDim + 5] = 0.5f;
  BAD(kvs_codec_spec(codec, spec, 4, &length), KVS_ERROR_ARGUMENT, "too small");
  CHECK(length > 4);
  BAD(kvs_codec_decode(codec, codes, kRows, NULL), KVS_ERROR_ARGUMENT, "out is NULL");
  BAD(kvs_codec_scores(codec, NULL, codes, kRows, scores), KVS_ERROR_ARGUMENT, "query is NULL");
  BAD(kvs_codec_accumulate(codec, weights, NULL, kRows, sum), KVS_ERROR_ARGUMENT, "codes is NULL");
  kvs_codec_destroy(codec);
  /* A freed handle is refused, not read (AddressSanitizer would see a read). */
  BAD(kvs_codec_dim(codec, &dim), KVS_ERROR_ARGUMENT, "not a live handle");
  kvs_codec_destroy(codec); /* twice: ignored */
  kvs_codec_destroy(NULL);
  free(codes);
}

enum { kLayers = 2, kHeads = 2, kDim = 64, kQHeads = 4, kTokens = 100 };

/* Keys and values [kv_heads][tokens][dim] with a per-channel offset, as a model's. */
static void model_like(float* x, size_t tokens) {
  size_t h, t, j;
  for (h = 0; h < kHeads; ++h)
    for (t = 0; t < tokens; ++t)
      for (j = 0; j < kDim; ++j) x[(h * tokens + t) * kDim + j] = 0.5f * (float)(j % 5) + uniform();
}

static void test_calibration(const char* path) {
  kvs_calibration *calibration = NULL, *loaded = NULL;
  float keys[kHeads * 64 * kDim], values[kHeads * 64 * kDim];
  int complete = -1;
  size_t layer;
  OK(kvs_calibration_create(kLayers, kHeads, kDim, "tq_mse:b=2.5|tq_mse:b=3", 5, &calibration));
  OK(kvs_calibration_complete(calibration, &complete));
  CHECK(complete == 0); /* the outlier split needs a sample */
  for (layer = 0; layer < kLayers; ++layer) {
    model_like(keys, 64);
    model_like(values, 64);
    OK(kvs_calibration_fit(calibration, layer, keys, values, 64));
  }
  OK(kvs_calibration_complete(calibration, &complete));
  CHECK(complete == 1);
  OK(kvs_calibration_save(calibration, path));
  OK(kvs_calibration_load(path, &loaded));
  OK(kvs_calibration_complete(loaded, &complete));
  CHECK(complete == 1);
  kvs_calibration_destroy(loaded);
  BAD(kvs_calibration_fit(calibration, kLayers, keys, values, 64), KVS_ERROR_REFUSED, "layer");
  BAD(kvs_calibration_fit(calibration, 0, NULL, values, 64), KVS_ERROR_ARGUMENT, "keys is NULL");
  BAD(kvs_calibration_load("/nonexistent/kvsketch.kvcal", &loaded), KVS_ERROR_REFUSED, "kvsketch.kvcal");
  CHECK(loaded == NULL); /* a failed load leaves no handle */
  BAD(kvs_calibration_create(1, 1, 64, "tq_mse:b=3|window=-1", 0, &loaded), KVS_ERROR_REFUSED, "window");
  kvs_calibration_destroy(calibration);
  kvs_calibration_destroy(loaded);
}

static void test_cache(const char* directory) {
  char path[512], calibration_path[512];
  kvs_cache_params params = kvs_cache_default_params();
  kvs_attention_params attention = kvs_attention_default_params();
  kvs_cache *exact = NULL, *loaded = NULL, *compressed = NULL, *other = NULL;
  kvs_calibration* calibration = NULL;
  uint64_t a = 0, b = 0, c = 0, ids[2], missing = 12345;
  size_t tokens = 0, bytes = 0, a_bytes = 0, layer, h, i;
  float* keys = malloc(kHeads * kTokens * kDim * sizeof(float));
  float* values = malloc(kHeads * kTokens * kDim * sizeof(float));
  uint16_t halves[kHeads * 10 * kDim];
  float queries[2 * kQHeads * kDim], output[2 * kQHeads * kDim], again[2 * kQHeads * kDim], lse[2 * kQHeads],
      lse_again[2 * kQHeads], expected[kDim], expected_lse, prefill[8 * kQHeads * kDim];
  int all_equal;

  /* An fp16 cache is exact up to fp16 rounding: decode equals attention over the inputs. */
  params.layers = kLayers;
  params.kv_heads = kHeads;
  params.head_dim = kDim;
  params.policy = "fp16|sinks=4|window=16|block=16|page=32|rollback=16";
  OK(kvs_cache_create(&params, &exact));
  OK(kvs_cache_add_sequence(exact, &a));
  model_like(keys, kTokens);
  model_like(values, kTokens);
  for (layer = 0; layer < kLayers; ++layer) OK(kvs_cache_append(exact, a, layer, KVS_FLOAT32, keys, values, kTokens));
  OK(kvs_cache_tokens(exact, a, 0, &tokens));
  CHECK(tokens == kTokens);
  fill(queries, 2 * kQHeads * kDim);
  ids[0] = a;
  OK(kvs_cache_decode(exact, 0, ids, 1, queries, kQHeads, output, lse, NULL));
  for (h = 0; h < kQHeads; ++h) {
    const size_t kv = h / (kQHeads / kHeads);
    exact_attention(queries + h * kDim, keys + kv * kTokens * kDim, values + kv * kTokens * kDim, kTokens, kDim, kDim,
                    expected, &expected_lse);
    CHECK(relative_error(output + h * kDim, expected, kDim) < 2e-3);
    CHECK(fabs(lse[h] - expected_lse) < 2e-3);
  }
  /* Prefill's last position is decode's answer, to the bit. */
  OK(kvs_cache_prefill(exact, 0, a, 1, queries, kQHeads, prefill, NULL, &attention));
  CHECK(memcmp(prefill, output, kQHeads * kDim * sizeof(float)) == 0);
  fill(prefill, 8 * kQHeads * kDim);
  OK(kvs_cache_prefill(exact, 0, a, 8, prefill, kQHeads, prefill, NULL, NULL));

  /* fp16 and bf16 appends; fork shares pages; truncate rolls back. */
  for (i = 0; i < kHeads * 10 * kDim; ++i) halves[i] = 0x3c00; /* 1.0 in fp16 */
  for (layer = 0; layer < kLayers; ++layer) OK(kvs_cache_append(exact, a, layer, KVS_FLOAT16, halves, halves, 10));
  for (i = 0; i < kHeads * 10 * kDim; ++i) halves[i] = 0x3f80; /* 1.0 in bf16 */
  for (layer = 0; layer < kLayers; ++layer) OK(kvs_cache_append(exact, a, layer, KVS_BFLOAT16, halves, halves, 10));
  OK(kvs_cache_tokens(exact, a, 1, &tokens));
  CHECK(tokens == kTokens + 20);
  OK(kvs_cache_sequence_bytes(exact, a, &a_bytes));
  OK(kvs_cache_fork(exact, a, &b));
  OK(kvs_cache_bytes(exact, &bytes));
  CHECK(bytes < 2 * a_bytes); /* the sealed pages are held once */
  OK(kvs_cache_truncate(exact, b, kTokens + 5));
  OK(kvs_cache_tokens(exact, b, 0, &tokens));
  CHECK(tokens == kTokens + 5);

  /* A batch of two sequences of different lengths; a saved and loaded cache gives the same bits. */
  ids[0] = a;
  ids[1] = b;
  OK(kvs_cache_decode(exact, 1, ids, 2, queries, kQHeads, output, lse, &attention));
  snprintf(path, sizeof path, "%s/c_api_test.kvp", directory);
  OK(kvs_cache_save(exact, path));
  OK(kvs_cache_load(path, &loaded));
  OK(kvs_cache_decode(loaded, 1, ids, 2, queries, kQHeads, again, lse_again, &attention));
  CHECK(memcmp(output, again, sizeof output) == 0 && memcmp(lse, lse_again, sizeof lse) == 0);
  snprintf(path, sizeof path, "%s/c_api_test.kvs", directory);
  OK(kvs_cache_save_sequence(exact, b, path));
  OK(kvs_cache_load_sequence(loaded, path, &c));
  OK(kvs_cache_tokens(loaded, c, 0, &tokens));
  CHECK(tokens == kTokens + 5);
  OK(kvs_cache_remove_sequence(loaded, c));

  /* A compressed cache from a calibration, as an engine starts one. */
  snprintf(calibration_path, sizeof calibration_path, "%s/c_api_test.kvcal", directory);
  test_calibration(calibration_path);
  OK(kvs_calibration_load(calibration_path, &calibration));
  params.calibration = calibration;
  OK(kvs_cache_create(&params, &compressed));
  OK(kvs_cache_add_sequence(compressed, &c));
  for (layer = 0; layer < kLayers; ++layer)
    OK(kvs_cache_append(compressed, c, layer, KVS_FLOAT32, keys, values, kTokens));
  ids[0] = c;
  OK(kvs_cache_decode(compressed, 0, ids, 1, queries, kQHeads, again, lse_again, NULL));
  all_equal = 1;
  for (h = 0; h < kQHeads; ++h) {
    const size_t kv = h / (kQHeads / kHeads);
    exact_attention(queries + h * kDim, keys + kv * kTokens * kDim, values + kv * kTokens * kDim, kTokens, kDim, kDim,
                    expected, &expected_lse);
    CHECK(relative_error(again + h * kDim, expected, kDim) < 0.2); /* 2.5/3-bit codes */
    all_equal = all_equal && relative_error(again + h * kDim, expected, kDim) == 0.0;
  }
  CHECK(!all_equal);
  kvs_calibration_destroy(calibration);
  calibration = NULL;
  OK(kvs_cache_calibration(compressed, &calibration));
  kvs_calibration_destroy(calibration);

  /* Bad calls: each refused with its reason, the cache unchanged. */
  OK(kvs_cache_tokens(exact, a, 0, &tokens));
  BAD(kvs_cache_append(exact, missing, 0, KVS_FLOAT32, keys, values, 1), KVS_ERROR_REFUSED, "12345");
  BAD(kvs_cache_append(exact, a, kLayers, KVS_FLOAT32, keys, values, 1), KVS_ERROR_REFUSED, "layer");
  BAD(kvs_cache_append(exact, a, 0, (kvs_dtype)7, keys, values, 1), KVS_ERROR_ARGUMENT, "dtype");
  BAD(kvs_cache_append(exact, a, 0, KVS_FLOAT32, NULL, values, 1), KVS_ERROR_ARGUMENT, "keys is NULL");
  values[3] = NAN;
  BAD(kvs_cache_append(exact, a, 0, KVS_FLOAT32, keys, values, 4), KVS_ERROR_REFUSED, "channel 3 is nan");
  values[3] = 0.0f;
  halves[5] = 0x7c00; /* +Inf in fp16 */
  BAD(kvs_cache_append(exact, a, 0, KVS_FLOAT16, halves, halves, 10), KVS_ERROR_REFUSED, "channel 5 is inf");
  {
    size_t after = 0;
    OK(kvs_cache_tokens(exact, a, 0, &after));
    CHECK(after == tokens);
  }
  ids[0] = a;
  BAD(kvs_cache_decode(exact, 0, ids, 1, queries, 3, output, lse, NULL), KVS_ERROR_REFUSED, "query heads");
  BAD(kvs_cache_decode(exact, 0, NULL, 1, queries, kQHeads, output, lse, NULL), KVS_ERROR_ARGUMENT, "sequences is NULL");
  ids[0] = missing;
  BAD(kvs_cache_decode(exact, 0, ids, 1, queries, kQHeads, output, lse, NULL), KVS_ERROR_REFUSED, "12345");
  ids[0] = a;
  attention.integer_arithmetic = 5;
  BAD(kvs_cache_decode(exact, 0, ids, 1, queries, kQHeads, output, lse, &attention), KVS_ERROR_ARGUMENT,
      "integer_arithmetic");
  attention = kvs_attention_default_params();
  attention.threads = -1;
  BAD(kvs_cache_decode(exact, 0, ids, 1, queries, kQHeads, output, lse, &attention), KVS_ERROR_ARGUMENT, "threads");
  attention.size = 0;
  BAD(kvs_cache_decode(exact, 0, ids, 1, queries, kQHeads, output, lse, &attention), KVS_ERROR_ARGUMENT, "size");
  BAD(kvs_cache_truncate(exact, a, tokens + 1), KVS_ERROR_REFUSED, "");
  BAD(kvs_cache_truncate(exact, a, 10), KVS_ERROR_REFUSED, "rollback");
  BAD(kvs_cache_fork(exact, missing, &c), KVS_ERROR_REFUSED, "12345");
  BAD(kvs_cache_remove_sequence(exact, missing), KVS_ERROR_REFUSED, "12345");
  BAD(kvs_cache_load("/nonexistent/cache.kvp", &other), KVS_ERROR_REFUSED, "cache.kvp");
  BAD(kvs_cache_load(calibration_path, &other), KVS_ERROR_REFUSED, "");
  CHECK(other == NULL);
  BAD(kvs_cache_load_sequence(compressed, path, &c), KVS_ERROR_REFUSED, "");
  params = kvs_cache_default_params();
  params.size = 0;
  BAD(kvs_cache_create(&params, &other), KVS_ERROR_ARGUMENT, "params->size");
  params = kvs_cache_default_params();
  params.policy = "tq_mse:b=3|sinks=x";
  BAD(kvs_cache_create(&params, &other), KVS_ERROR_REFUSED, "sinks");
  params.policy = NULL;
  BAD(kvs_cache_create(&params, &other), KVS_ERROR_ARGUMENT, "policy is NULL");
  params = kvs_cache_default_params();
  params.head_dim = 0;
  BAD(kvs_cache_create(&params, &other), KVS_ERROR_REFUSED, "head_dim");
  BAD(kvs_cache_bytes((const kvs_cache*)exact, NULL), KVS_ERROR_ARGUMENT, "bytes is NULL");
  /* A handle of another type is not a live cache. */
  BAD(kvs_cache_bytes((const kvs_cache*)&params, &bytes), KVS_ERROR_ARGUMENT, "not a live handle");
  OK(kvs_cache_tokens(exact, a, 0, &bytes));
  CHECK(bytes == tokens);

  kvs_cache_destroy(exact);
  BAD(kvs_cache_add_sequence(exact, &c), KVS_ERROR_ARGUMENT, "not a live handle");
  kvs_cache_destroy(loaded);
  kvs_cache_destroy(compressed);
  kvs_cache_destroy(NULL);
  free(keys);
  free(values);
}

/* attend_chunk before the chunk's append: over an fp16 cache each query's answer is exact attention
 * over the past and the chunk up to it, as fp16 holds them; bad keys are refused. */
static void test_attend_chunk(void) {
  enum { kPast = 92, kChunk = kTokens - kPast };
  kvs_cache_params params = kvs_cache_default_params();
  kvs_cache* cache = NULL;
  uint64_t a = 0;
  size_t h, t, i;
  float* keys = malloc(kHeads * kTokens * kDim * sizeof(float));
  float* values = malloc(kHeads * kTokens * kDim * sizeof(float));
  float* past_keys = malloc(kHeads * kPast * kDim * sizeof(float));
  float* past_values = malloc(kHeads * kPast * kDim * sizeof(float));
  float chunk_keys[kHeads * kChunk * kDim], chunk_values[kHeads * kChunk * kDim], queries[kChunk * kQHeads * kDim],
      output[kChunk * kQHeads * kDim], lse[kChunk * kQHeads], expected[kDim], expected_lse;
  params.layers = 1;
  params.kv_heads = kHeads;
  params.head_dim = kDim;
  params.policy = "fp16|sinks=4|window=16|block=16|page=32";
  OK(kvs_cache_create(&params, &cache));
  OK(kvs_cache_add_sequence(cache, &a));
  model_like(keys, kTokens);
  model_like(values, kTokens);
  for (h = 0; h < kHeads; ++h)
    for (t = 0; t < kTokens; ++t) {
      float* k = t < kPast ? past_keys + (h * kPast + t) * kDim : chunk_keys + (h * kChunk + t - kPast) * kDim;
      float* v = t < kPast ? past_values + (h * kPast + t) * kDim : chunk_values + (h * kChunk + t - kPast) * kDim;
      memcpy(k, keys + (h * kTokens + t) * kDim, kDim * sizeof(float));
      memcpy(v, values + (h * kTokens + t) * kDim, kDim * sizeof(float));
    }
  OK(kvs_cache_append(cache, a, 0, KVS_FLOAT32, past_keys, past_values, kPast));
  fill(queries, kChunk * kQHeads * kDim);
  OK(kvs_cache_attend_chunk(cache, 0, a, kChunk, queries, kQHeads, KVS_FLOAT32, chunk_keys, chunk_values, output, lse,
                            NULL));
  for (i = 0; i < kChunk; ++i)
    for (h = 0; h < kQHeads; ++h) {
      const size_t kv = h / (kQHeads / kHeads), row = i * kQHeads + h;
      /* keys and values [kv_heads][kTokens][dim]: position kPast + i's prefix of KV head kv */
      exact_attention(queries + row * kDim, keys + kv * kTokens * kDim, values + kv * kTokens * kDim, kPast + i + 1,
                      kDim, kDim, expected, &expected_lse);
      CHECK(relative_error(output + row * kDim, expected, kDim) < 2e-3);
      CHECK(fabs(lse[row] - expected_lse) < 2e-3);
    }
  chunk_keys[3] = NAN;
  BAD(kvs_cache_attend_chunk(cache, 0, a, kChunk, queries, kQHeads, KVS_FLOAT32, chunk_keys, chunk_values, output,
                             lse, NULL),
      KVS_ERROR_REFUSED, "channel 3 is nan");
  BAD(kvs_cache_attend_chunk(cache, 0, a, kChunk, queries, kQHeads, KVS_FLOAT32, NULL, chunk_values, output, lse,
                             NULL),
      KVS_ERROR_ARGUMENT, "keys is NULL");
  kvs_cache_destroy(cache);
  free(keys);
  free(values);
  free(past_keys);
  free(past_values);
}

static void test_merge(void) {
  enum { kTokensHere = 40 };
  float keys[kTokensHere * kDim], values[kTokensHere * kDim], q[kDim], out_a[kDim], out_b[kDim], whole[kDim];
  float lse_a, lse_b, lse_whole;
  fill(keys, kTokensHere * kDim);
  fill(values, kTokensHere * kDim);
  fill(q, kDim);
  exact_attention(q, keys, values, 15, kDim, kDim, out_a, &lse_a);
  exact_attention(q, keys + 15 * kDim, values + 15 * kDim, kTokensHere - 15, kDim, kDim, out_b, &lse_b);
  exact_attention(q, keys, values, kTokensHere, kDim, kDim, whole, &lse_whole);
  OK(kvs_merge_attention(out_a, &lse_a, out_b, &lse_b, 1, kDim, out_a, &lse_a));
  CHECK(relative_error(out_a, whole, kDim) < 1e-5);
  CHECK(fabs(lse_a - lse_whole) < 1e-5);
  BAD(kvs_merge_attention(NULL, &lse_a, out_b, &lse_b, 1, kDim, out_a, &lse_a), KVS_ERROR_ARGUMENT, "output_a is NULL");
  BAD(kvs_merge_attention(out_a, &lse_a, out_b, &lse_b, 0, kDim, out_a, &lse_a), KVS_ERROR_ARGUMENT, "heads");
}

static void test_index(const char* directory) {
  enum { kIndexDim = 32, kRows = 500, kQueries = 10, kK = 5 };
  kvs_index_params params = kvs_index_default_params();
  kvs_index *index = NULL, *loaded = NULL;
  float* x = malloc(kRows * kIndexDim * sizeof(float));
  int64_t ids[kQueries * kK], again[kQueries * kK], remove_ids[3] = {1, 2, 99999}, duplicate = 7;
  float scores[kQueries * kK], again_scores[kQueries * kK];
  size_t size = 0, bytes = 0, removed = 0, i, self = 0;
  char path[512];
  fill(x, kRows * kIndexDim);
  params.codec = "tq_mse:b=4,rescale=1";
  params.metric = "l2";
  OK(kvs_index_create(kIndexDim, &params, &index));
  OK(kvs_index_add(index, x, kRows, NULL));
  OK(kvs_index_size(index, &size));
  CHECK(size == kRows);
  OK(kvs_index_bytes(index, &bytes));
  CHECK(bytes >= kRows * (kIndexDim / 2 + 2)); /* codes and norms at least */
  /* Stored rows as queries: each finds itself first. */
  OK(kvs_index_search(index, x + 20 * kIndexDim, kQueries, kK, ids, scores));
  for (i = 0; i < kQueries; ++i) self += ids[i * kK] == (int64_t)(20 + i);
  CHECK(self >= kQueries - 1);
  snprintf(path, sizeof path, "%s/c_api_test.kvi", directory);
  OK(kvs_index_save(index, path));
  OK(kvs_index_load(path, &loaded));
  OK(kvs_index_search(loaded, x + 20 * kIndexDim, kQueries, kK, again, again_scores));
  CHECK(memcmp(ids, again, sizeof ids) == 0);
  OK(kvs_index_remove(index, remove_ids, 3, &removed));
  CHECK(removed == 2);
  OK(kvs_index_size(index, &size));
  CHECK(size == kRows - 2);

  kvs_index_destroy(loaded);
  params.metric = "manhattan";
  BAD(kvs_index_create(kIndexDim, &params, &loaded), KVS_ERROR_REFUSED, "manhattan");
  BAD(kvs_index_search(index, x, 1, kRows, ids, scores), KVS_ERROR_REFUSED, "k");
  x[3] = NAN;
  BAD(kvs_index_add(index, x, 1, &remove_ids[2]), KVS_ERROR_REFUSED, "NaN");
  x[3] = 0.0f;
  BAD(kvs_index_add(index, x, 1, &duplicate), KVS_ERROR_REFUSED, "7");
  OK(kvs_index_size(index, &size));
  CHECK(size == kRows - 2);
  BAD(kvs_index_load("/nonexistent/index.kvi", &loaded), KVS_ERROR_REFUSED, "index.kvi");
  kvs_index_destroy(index);
  kvs_index_destroy(loaded);
  free(x);
}

static void test_ivf_index(const char* directory) {
  enum { kIvfDim = 16, kRows = 600, kQueries = 10, kK = 5 };
  kvs_ivf_index *index = NULL, *loaded = NULL, *fresh = NULL;
  float* x = malloc(kRows * kIvfDim * sizeof(float));
  int64_t ids[kQueries * kK], again[kQueries * kK], doomed[2] = {3, 4};
  float scores[kQueries * kK], again_scores[kQueries * kK];
  size_t size = 0, bytes = 0, removed = 0, i, self = 0;
  char path[512];
  fill(x, kRows * kIvfDim);
  OK(kvs_ivf_index_create(kIvfDim, "ivf:nlist=12,nprobe=12,metric=l2,fast_scan=0|tq_mse:b=4", 0, &index));
  BAD(kvs_ivf_index_search(index, x, 1, 1, 0, ids, scores), KVS_ERROR_REFUSED, "before train");
  OK(kvs_ivf_index_train(index, x, kRows));
  OK(kvs_ivf_index_add(index, x, kRows, NULL));
  OK(kvs_ivf_index_size(index, &size));
  CHECK(size == kRows);
  OK(kvs_ivf_index_bytes(index, &bytes));
  CHECK(bytes == kRows * (kIvfDim / 2 + 2 + 8 + 2) + (12 * kIvfDim + 12) * 4);
  OK(kvs_ivf_index_search(index, x + 40 * kIvfDim, kQueries, kK, 0, ids, scores));
  for (i = 0; i < kQueries; ++i) self += ids[i * kK] == (int64_t)(40 + i);
  CHECK(self >= kQueries - 1);
  snprintf(path, sizeof path, "%s/c_api_test.kvivf", directory);
  OK(kvs_ivf_index_save(index, path));
  OK(kvs_ivf_index_load(path, &loaded));
  OK(kvs_ivf_index_search(loaded, x + 40 * kIvfDim, kQueries, kK, 0, again, again_scores));
  CHECK(memcmp(ids, again, sizeof ids) == 0 && memcmp(scores, again_scores, sizeof scores) == 0);
  kvs_ivf_index_destroy(loaded);
  OK(kvs_ivf_index_map(path, &loaded));
  OK(kvs_ivf_index_search(loaded, x + 40 * kIvfDim, kQueries, kK, 0, again, again_scores));
  CHECK(memcmp(ids, again, sizeof ids) == 0 && memcmp(scores, again_scores, sizeof scores) == 0);
  BAD(kvs_ivf_index_map(NULL, &fresh), KVS_ERROR_ARGUMENT, "path");
  BAD(kvs_ivf_index_map("/nonexistent/x.kvivf", &fresh), KVS_ERROR_REFUSED, "nonexistent");
  OK(kvs_ivf_index_remove(index, doomed, 2, &removed));
  CHECK(removed == 2);
  BAD(kvs_ivf_index_create(kIvfDim, "ivf:nlist=x|tq_mse:b=4", 0, &fresh), KVS_ERROR_REFUSED, "ivf factory");
  BAD(kvs_ivf_index_create(kIvfDim, "ivf:nlist=4", -1, &fresh), KVS_ERROR_ARGUMENT, "threads");
  BAD(kvs_ivf_index_train(index, NULL, 10), KVS_ERROR_ARGUMENT, "x is NULL");
  BAD(kvs_ivf_index_train(index, x, kRows), KVS_ERROR_REFUSED, "trained already");
  OK(kvs_ivf_index_add(index, x, 1, doomed + 1)); /* a removed id is free again */
  BAD(kvs_ivf_index_add(index, x, 1, doomed + 1), KVS_ERROR_REFUSED, "already taken");
  CHECK(fresh == NULL);
  kvs_ivf_index_destroy(index);
  kvs_ivf_index_destroy(loaded);
  BAD(kvs_ivf_index_size(index, &size), KVS_ERROR_ARGUMENT, "not a live handle");
  free(x);
}

/* Selection attention: a top-k selector that keeps every body token is dense attention over the
 * same codes; MagicPIG's samples come near it; bad calls are refused. */
static void test_selection_cache(void) {
  enum { kSelHeads = 2, kSelQHeads = 4, kSelTokens = 400 };
  kvs_selection_params params = kvs_selection_default_params();
  kvs_selection_cache *all = NULL, *sampled = NULL, *fresh = NULL;
  kvs_cache* cache = NULL;
  kvs_cache_params cache_params = kvs_cache_default_params();
  kvs_attention_params in_float = kvs_attention_default_params();
  const size_t dense_layers[1] = {1}, bad_layers[1] = {2};
  float* keys = malloc(kSelHeads * kSelTokens * kDim * sizeof(float));
  float* values = malloc(kSelHeads * kSelTokens * kDim * sizeof(float));
  float queries[kSelQHeads * kDim], output[kSelQHeads * kDim], lse[kSelQHeads];
  float dense[kSelQHeads * kDim], dense_lse[kSelQHeads];
  size_t tokens = 0, kv_bytes = 0, index_bytes = 0, h;
  uint64_t sequence = 0;
  fill(keys, kSelHeads * kSelTokens * kDim);
  fill(values, kSelHeads * kSelTokens * kDim);
  /* Each query close to one body token of its head, so that attention is peaked, as in a model. */
  for (h = 0; h < kSelQHeads * kDim; ++h)
    queries[h] = 3.0f * keys[((h / kDim) / 2 * kSelTokens + 100 + h / kDim) * kDim + h % kDim];
  params.layers = 2;
  params.kv_heads = kSelHeads;
  params.head_dim = kDim;
  params.policy = "tq_mse:b=4|tq_mse:b=4|window=32|block=16";
  params.selector = "topk:budget=1";
  params.dense_layers = dense_layers;
  params.dense_count = 1;
  params.seed = 7;
  OK(kvs_selection_cache_create(&params, &all));
  params.selector = "magicpig:K=4,L=40";
  OK(kvs_selection_cache_create(&params, &sampled));
  OK(kvs_selection_cache_append(all, 0, KVS_FLOAT32, keys, values, kSelTokens));
  OK(kvs_selection_cache_append(sampled, 0, KVS_FLOAT32, keys, values, kSelTokens));
  OK(kvs_selection_cache_tokens(all, 0, &tokens));
  CHECK(tokens == kSelTokens);
  /* The paged cache of the same policy and seed holds the same codes. */
  cache_params.layers = 2;
  cache_params.kv_heads = kSelHeads;
  cache_params.head_dim = kDim;
  cache_params.policy = params.policy;
  cache_params.seed = 7;
  in_float.integer_arithmetic = 0;
  OK(kvs_cache_create(&cache_params, &cache));
  OK(kvs_cache_add_sequence(cache, &sequence));
  OK(kvs_cache_append(cache, sequence, 0, KVS_FLOAT32, keys, values, kSelTokens));
  OK(kvs_cache_decode(cache, 0, &sequence, 1, queries, kSelQHeads, dense, dense_lse, &in_float));
  OK(kvs_selection_cache_attention(all, 0, queries, kSelQHeads, 0, output, lse));
  CHECK(relative_error(output, dense, kSelQHeads * kDim) < 1e-5);
  for (h = 0; h < kSelQHeads; ++h) CHECK(fabs(lse[h] - dense_lse[h]) < 1e-4);
  OK(kvs_selection_cache_attention(sampled, 0, queries, kSelQHeads, 1, output, NULL));
  CHECK(relative_error(output, dense, kSelQHeads * kDim) < 0.05); /* 0.0067 */
  CHECK(relative_error(output, dense, kSelQHeads * kDim) > 1e-6);
  OK(kvs_selection_cache_bytes(sampled, &kv_bytes, &index_bytes));
  CHECK(kv_bytes > 0 && index_bytes > 0);
  OK(kvs_selection_cache_bytes(sampled, NULL, NULL));
  BAD(kvs_selection_cache_attention(sampled, 0, queries, 3, 0, output, lse), KVS_ERROR_REFUSED, "query heads");
  BAD(kvs_selection_cache_attention(sampled, 2, queries, kSelQHeads, 0, output, lse), KVS_ERROR_REFUSED, "layer 2");
  BAD(kvs_selection_cache_attention(sampled, 0, NULL, kSelQHeads, 0, output, lse), KVS_ERROR_ARGUMENT, "queries");
  BAD(kvs_selection_cache_append(sampled, 0, (kvs_dtype)9, keys, values, 1), KVS_ERROR_ARGUMENT, "dtype");
  keys[5] = NAN;
  BAD(kvs_selection_cache_append(sampled, 0, KVS_FLOAT32, keys, values, 1), KVS_ERROR_REFUSED, "");
  OK(kvs_selection_cache_tokens(sampled, 0, &tokens));
  CHECK(tokens == kSelTokens); /* refused appends changed nothing */
  params.dense_layers = bad_layers;
  BAD(kvs_selection_cache_create(&params, &fresh), KVS_ERROR_ARGUMENT, "dense_layers[0]");
  params.dense_layers = NULL;
  BAD(kvs_selection_cache_create(&params, &fresh), KVS_ERROR_ARGUMENT, "dense_layers is NULL");
  params.dense_count = 0;
  params.selector = "magicpig:K=0";
  BAD(kvs_selection_cache_create(&params, &fresh), KVS_ERROR_REFUSED, "magicpig");
  CHECK(fresh == NULL);
  kvs_selection_cache_destroy(all);
  kvs_selection_cache_destroy(sampled);
  kvs_cache_destroy(cache);
  BAD(kvs_selection_cache_tokens(all, 0, &tokens), KVS_ERROR_ARGUMENT, "not a live handle");
  free(keys);
  free(values);
}

/* Selection over a paged cache: one sequence without rollback answers as the one-sequence cache,
 * bit for bit; a fork has its own selectors; bad calls are refused. */
static void test_paged_selection(void) {
  enum { kSelHeads = 2, kSelQHeads = 4, kSelTokens = 400 };
  kvs_selection_params params = kvs_selection_default_params();
  kvs_selection_cache* single = NULL;
  kvs_paged_selection *paged = NULL, *fresh = NULL;
  float* keys = malloc(kSelHeads * kSelTokens * kDim * sizeof(float));
  float* values = malloc(kSelHeads * kSelTokens * kDim * sizeof(float));
  float queries[2 * kSelQHeads * kDim], output[2 * kSelQHeads * kDim], lse[2 * kSelQHeads];
  float want[kSelQHeads * kDim], want_lse[kSelQHeads];
  size_t tokens = 0, indexed = 0, kv_bytes = 0, index_bytes = 0, single_index = 0, h;
  uint64_t a = 0, b = 0, pair[2];
  fill(keys, kSelHeads * kSelTokens * kDim);
  fill(values, kSelHeads * kSelTokens * kDim);
  fill(queries, 2 * kSelQHeads * kDim);
  params.layers = 1;
  params.kv_heads = kSelHeads;
  params.head_dim = kDim;
  params.policy = "tq_mse:b=3|window=32|block=16|page=64";
  params.selector = "magicpig:K=4,L=40";
  params.seed = 5;
  OK(kvs_selection_cache_create(&params, &single));
  OK(kvs_paged_selection_create(&params, &paged));
  OK(kvs_selection_cache_append(single, 0, KVS_FLOAT32, keys, values, kSelTokens));
  OK(kvs_paged_selection_add_sequence(paged, &a));
  OK(kvs_paged_selection_append(paged, a, 0, KVS_FLOAT32, keys, values, kSelTokens));
  OK(kvs_paged_selection_fork(paged, a, &b));
  OK(kvs_paged_selection_truncate(paged, b, kSelTokens - 3)); /* window tokens only */
  OK(kvs_paged_selection_tokens(paged, b, 0, &tokens, &indexed));
  CHECK(tokens == kSelTokens - 3 && indexed == 352);
  OK(kvs_paged_selection_tokens(paged, a, 0, NULL, NULL));
  pair[0] = a;
  pair[1] = b;
  OK(kvs_paged_selection_attention(paged, 0, pair, 2, queries, kSelQHeads, 4, output, lse));
  OK(kvs_selection_cache_attention(single, 0, queries, kSelQHeads, 4, want, want_lse));
  for (h = 0; h < kSelQHeads * kDim; ++h) CHECK(output[h] == want[h]);
  for (h = 0; h < kSelQHeads; ++h) CHECK(lse[h] == want_lse[h]);
  CHECK(relative_error(output + kSelQHeads * kDim, want, kSelQHeads * kDim) > 1e-6); /* other queries */
  OK(kvs_paged_selection_bytes(paged, &kv_bytes, &index_bytes));
  OK(kvs_selection_cache_bytes(single, NULL, &single_index));
  /* The fork holds a copy of the index (its vectors at their size, not the original capacity). */
  CHECK(kv_bytes > 0 && index_bytes > single_index && index_bytes <= 2 * single_index);
  OK(kvs_paged_selection_remove_sequence(paged, b));
  OK(kvs_paged_selection_bytes(paged, NULL, &index_bytes));
  CHECK(index_bytes == single_index);
  OK(kvs_paged_selection_bytes(paged, NULL, NULL));
  BAD(kvs_paged_selection_attention(paged, 0, pair, 2, queries, kSelQHeads, 0, output, lse), KVS_ERROR_REFUSED,
      "no sequence");
  BAD(kvs_paged_selection_attention(paged, 0, NULL, 1, queries, kSelQHeads, 0, output, lse), KVS_ERROR_ARGUMENT,
      "sequences");
  BAD(kvs_paged_selection_attention(paged, 0, &a, 1, queries, 3, 0, output, lse), KVS_ERROR_REFUSED, "query heads");
  BAD(kvs_paged_selection_fork(paged, b, &a), KVS_ERROR_REFUSED, "no sequence");
  BAD(kvs_paged_selection_fork(paged, a, NULL), KVS_ERROR_ARGUMENT, "sequence");
  BAD(kvs_paged_selection_add_sequence(paged, NULL), KVS_ERROR_ARGUMENT, "sequence");
  BAD(kvs_paged_selection_truncate(paged, a, 10), KVS_ERROR_REFUSED, "rollback");
  BAD(kvs_paged_selection_remove_sequence(paged, b), KVS_ERROR_REFUSED, "no sequence");
  BAD(kvs_paged_selection_tokens(paged, b, 0, &tokens, NULL), KVS_ERROR_REFUSED, "no sequence");
  BAD(kvs_paged_selection_append(paged, a, 0, (kvs_dtype)9, keys, values, 1), KVS_ERROR_ARGUMENT, "dtype");
  keys[5] = NAN;
  BAD(kvs_paged_selection_append(paged, a, 0, KVS_FLOAT32, keys, values, 1), KVS_ERROR_REFUSED, "");
  OK(kvs_paged_selection_tokens(paged, a, 0, &tokens, NULL));
  CHECK(tokens == kSelTokens); /* refused calls changed nothing */
  params.selector = "magicpig:K=0";
  BAD(kvs_paged_selection_create(&params, &fresh), KVS_ERROR_REFUSED, "magicpig");
  CHECK(fresh == NULL);
  kvs_paged_selection_destroy(paged);
  kvs_selection_cache_destroy(single);
  BAD(kvs_paged_selection_bytes(paged, &kv_bytes, NULL), KVS_ERROR_ARGUMENT, "not a live handle");
  free(keys);
  free(values);
}

int main(int argc, char** argv) {
  const char* directory = argc > 1 ? argv[1] : ".";
  test_version();
  test_codec();
  test_cache(directory);
  test_attend_chunk();
  test_merge();
  test_index(directory);
  test_ivf_index(directory);
  test_selection_cache();
  test_paged_selection();
  printf("c_api_test: %d bad calls refused as expected; %d failures\n", bad_calls, failures);
  return failures == 0 ? 0 : 1;
}

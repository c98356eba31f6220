/* kvsketch C ABI: codecs, the paged multi-sequence KV cache, its calibration, the attention merge
 * and the flat and IVF vector indexes, for engines and languages that call C (C, C++, Rust, Go, Python's
 * ctypes).
 *
 * Conventions
 *   - Every function returns a kvs_status; KVS_OK is 0. On any other status, kvs_last_error()
 *     returns a message naming the argument and what was expected (thread-local, valid until the
 *     thread's next kvs_ call). No C++ exception crosses this boundary.
 *   - Objects are opaque handles made by kvs_*_create / *_load and freed by kvs_*_destroy (which
 *     accepts NULL). A NULL, freed or wrong handle is refused with KVS_ERROR_ARGUMENT. A failed
 *     create or load sets its handle to NULL.
 *   - Parameter structs start with their size: fill them with kvs_*_default_params(), which sets
 *     it, then change fields. A struct from an older header (smaller size) keeps the defaults of
 *     the fields it lacks.
 *   - Output buffers are the caller's; their sizes are stated per function, and functions that
 *     take a buffer's size check it.
 *   - A handle may be used from one thread at a time (calls on different handles run in parallel;
 *     decode itself uses the library's threads).
 *
 * Shapes (row-major): keys and values [kv_heads][tokens][head_dim]; queries and outputs
 * [batch][q_heads][head_dim]; lse [batch][q_heads]. Codes of n rows: n * code_bytes bytes.
 */
#ifndef KVSKETCH_KVSKETCH_H_
#define KVSKETCH_KVSKETCH_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KVS_API __attribute__((visibility("default")))
#else
#define KVS_API
#endif

#define KVS_VERSION_MAJOR 0
#define KVS_VERSION_MINOR 1
#define KVS_VERSION_PATCH 0
/* Raised whenever a function, struct or enum of this header changes incompatibly. */
#define KVS_ABI_VERSION 1

typedef enum kvs_status {
  KVS_OK = 0,
  KVS_ERROR_ARGUMENT = 1, /* a NULL, freed or wrong handle or pointer, a size or value out of range */
  KVS_ERROR_REFUSED = 2,  /* the library refused the request: a spec, a shape, a file, NaN input */
  KVS_ERROR_MEMORY = 3,   /* an allocation failed */
  KVS_ERROR_INTERNAL = 4, /* a defect: please report the message */
  KVS_STATUS_MAX_ENUM = 0x7fffffff /* keeps the enum 32 bits wide, any int value representable */
} kvs_status;

typedef enum kvs_dtype { KVS_FLOAT32 = 0, KVS_FLOAT16 = 1, KVS_BFLOAT16 = 2, KVS_DTYPE_MAX_ENUM = 0x7fffffff } kvs_dtype;

KVS_API uint32_t kvs_abi_version(void);
KVS_API const char* kvs_version(void); /* "0.1.0" */
KVS_API const char* kvs_last_error(void);

/* ---- Codecs ---------------------------------------------------------------------------------- */
typedef struct kvs_codec kvs_codec;

/* A codec from a spec string ("tq_mse:b=3", "tq_prod:b=3", "int8", ...; see the README). */
KVS_API kvs_status kvs_codec_create(const char* spec, size_t dim, uint64_t seed, kvs_codec** codec);
KVS_API void kvs_codec_destroy(kvs_codec* codec);
KVS_API kvs_status kvs_codec_dim(const kvs_codec* codec, size_t* dim);
KVS_API kvs_status kvs_codec_code_bytes(const kvs_codec* codec, size_t* bytes);
/* The canonical spec, NUL-terminated, into spec[0, capacity); *length (may be NULL) gets its
 * length. A capacity too small is refused, with *length set. */
KVS_API kvs_status kvs_codec_spec(const kvs_codec* codec, char* spec, size_t capacity, size_t* length);
/* codes[0, n * code_bytes) = the codes of x (n x dim floats). */
KVS_API kvs_status kvs_codec_encode(const kvs_codec* codec, const float* x, size_t n, uint8_t* codes,
                                    size_t codes_size);
/* out (n x dim floats) = the rows decoded. */
KVS_API kvs_status kvs_codec_decode(const kvs_codec* codec, const uint8_t* codes, size_t n, float* out);
/* out[i] = <query, row i decoded> for n rows, estimated from the codes. */
KVS_API kvs_status kvs_codec_scores(const kvs_codec* codec, const float* query, const uint8_t* codes, size_t n,
                                    float* out);
/* out (dim floats) += sum_i weights[i] * row i decoded. */
KVS_API kvs_status kvs_codec_accumulate(const kvs_codec* codec, const float* weights, const uint8_t* codes, size_t n,
                                        float* out);

/* ---- Calibration ----------------------------------------------------------------------------- */
typedef struct kvs_calibration kvs_calibration;

KVS_API kvs_status kvs_calibration_create(size_t layers, size_t kv_heads, size_t head_dim, const char* policy,
                                          uint64_t seed, kvs_calibration** calibration);
KVS_API void kvs_calibration_destroy(kvs_calibration* calibration);
/* Fits a layer from a sample of its keys and values ([kv_heads][tokens][head_dim] floats). */
KVS_API kvs_status kvs_calibration_fit(kvs_calibration* calibration, size_t layer, const float* keys,
                                       const float* values, size_t tokens);
/* *complete = 1 when every layer that needs a fit has one. */
KVS_API kvs_status kvs_calibration_complete(const kvs_calibration* calibration, int* complete);
KVS_API kvs_status kvs_calibration_save(const kvs_calibration* calibration, const char* path);
KVS_API kvs_status kvs_calibration_load(const char* path, kvs_calibration** calibration);

/* ---- The paged multi-sequence KV cache ------------------------------------------------------- */
typedef struct kvs_cache kvs_cache;

typedef struct kvs_cache_params {
  size_t size;         /* sizeof(kvs_cache_params), set by kvs_cache_default_params */
  size_t layers;       /* 1 */
  size_t kv_heads;     /* 1 */
  size_t head_dim;     /* 128 */
  const char* policy;  /* "tq_prod:b=3|tq_mse:b=3" (the KV policy grammar) */
  uint64_t seed;       /* 0 */
  /* Optional: a calibration to start from (copied; its shape, policy and seed then replace the
   * fields above). NULL: each layer is fitted from the first sequence that encodes it. */
  const kvs_calibration* calibration;
} kvs_cache_params;

typedef struct kvs_attention_params {
  size_t size;            /* sizeof(kvs_attention_params) */
  int threads;            /* 0: all of the library's threads */
  int integer_arithmetic; /* 1 (default): the fused integer kernels; 0: float arithmetic */
} kvs_attention_params;

KVS_API kvs_cache_params kvs_cache_default_params(void);
KVS_API kvs_attention_params kvs_attention_default_params(void);

KVS_API kvs_status kvs_cache_create(const kvs_cache_params* params, kvs_cache** cache);
KVS_API void kvs_cache_destroy(kvs_cache* cache);
KVS_API kvs_status kvs_cache_add_sequence(kvs_cache* cache, uint64_t* sequence);
/* A new sequence sharing every sealed page of `source`. */
KVS_API kvs_status kvs_cache_fork(kvs_cache* cache, uint64_t source, uint64_t* sequence);
/* Keeps the first `tokens` tokens of every layer of the sequence (policy field rollback=N). */
KVS_API kvs_status kvs_cache_truncate(kvs_cache* cache, uint64_t sequence, size_t tokens);
KVS_API kvs_status kvs_cache_remove_sequence(kvs_cache* cache, uint64_t sequence);
KVS_API kvs_status kvs_cache_tokens(const kvs_cache* cache, uint64_t sequence, size_t layer, size_t* tokens);
/* Appends `tokens` tokens of keys and values ([kv_heads][tokens][head_dim] of dtype) to a layer. */
KVS_API kvs_status kvs_cache_append(kvs_cache* cache, uint64_t sequence, size_t layer, kvs_dtype dtype,
                                    const void* keys, const void* values, size_t tokens);
/* One decode step of a layer for `batch` sequences: output and lse (may be NULL) are the caller's.
 * params may be NULL (defaults). */
KVS_API kvs_status kvs_cache_decode(const kvs_cache* cache, size_t layer, const uint64_t* sequences, size_t batch,
                                    const float* queries, size_t q_heads, float* output, float* lse,
                                    const kvs_attention_params* params);
/* The last `chunk` tokens of a sequence (appended already) as queries, causally. */
KVS_API kvs_status kvs_cache_prefill(const kvs_cache* cache, size_t layer, uint64_t sequence, size_t chunk,
                                     const float* queries, size_t q_heads, float* output, float* lse,
                                     const kvs_attention_params* params);
/* Chunked prefill as engines run it: called before the chunk is appended, `chunk` queries attend
 * the sequence as the cache holds it and the chunk's own keys and values ([kv_heads][chunk][head_dim]
 * of dtype, as kvs_cache_append takes them) exactly, query i the chunk's tokens 0..i. Append the
 * chunk afterwards. */
KVS_API kvs_status kvs_cache_attend_chunk(const kvs_cache* cache, size_t layer, uint64_t sequence, size_t chunk,
                                          const float* queries, size_t q_heads, kvs_dtype dtype, const void* keys,
                                          const void* values, float* output, float* lse,
                                          const kvs_attention_params* params);
/* Bytes held (shared pages once), and one sequence's bytes. */
KVS_API kvs_status kvs_cache_bytes(const kvs_cache* cache, size_t* bytes);
KVS_API kvs_status kvs_cache_sequence_bytes(const kvs_cache* cache, uint64_t sequence, size_t* bytes);
KVS_API kvs_status kvs_cache_save(const kvs_cache* cache, const char* path);
KVS_API kvs_status kvs_cache_load(const char* path, kvs_cache** cache);
KVS_API kvs_status kvs_cache_save_sequence(const kvs_cache* cache, uint64_t sequence, const char* path);
KVS_API kvs_status kvs_cache_load_sequence(kvs_cache* cache, const char* path, uint64_t* sequence);
/* A copy of the calibration the cache uses (fitted from its first sequence where none was given). */
KVS_API kvs_status kvs_cache_calibration(const kvs_cache* cache, kvs_calibration** calibration);

/* Merges two partial attention results over disjoint token sets (outputs [heads][dim], lse
 * [heads], -inf for no tokens) into output and lse, which may be a's or b's buffers. */
KVS_API kvs_status kvs_merge_attention(const float* output_a, const float* lse_a, const float* output_b,
                                       const float* lse_b, size_t heads, size_t dim, float* output, float* lse);

/* ---- Sampling and selection attention (MagicPIG, BalanceKV, top-k, uniform) ------------------ */
/* One sequence whose compressed body is attended through a token selector: the fp16 sinks and
 * window exactly, the body through the tokens the selector picks (read from their codes), merged by
 * log-sum-exp; dense layers attend to every token. */
typedef struct kvs_selection_cache kvs_selection_cache;

typedef struct kvs_selection_params {
  size_t size;                /* sizeof(kvs_selection_params) */
  size_t layers;              /* 1 */
  size_t kv_heads;            /* 1 */
  size_t head_dim;            /* 128 */
  const char* policy;         /* "tq_prod:b=3|tq_mse:b=3" (the KV policy grammar) */
  const char* selector;       /* "magicpig:K=10,L=150"; "balancekv:ratio=0.25", "topk:budget=0.1", ... */
  const size_t* dense_layers; /* NULL: none; else dense_count layer numbers attended densely */
  size_t dense_count;         /* 0 */
  uint64_t seed;              /* 0: the codecs' and the selectors' */
} kvs_selection_params;

KVS_API kvs_selection_params kvs_selection_default_params(void);
KVS_API kvs_status kvs_selection_cache_create(const kvs_selection_params* params, kvs_selection_cache** cache);
KVS_API void kvs_selection_cache_destroy(kvs_selection_cache* cache);
/* Appends `tokens` tokens ([kv_heads][tokens][head_dim] of dtype) to a layer; the selectors follow. */
KVS_API kvs_status kvs_selection_cache_append(kvs_selection_cache* cache, size_t layer, kvs_dtype dtype,
                                              const void* keys, const void* values, size_t tokens);
/* All query heads of a layer (queries and output [q_heads][head_dim], lse [q_heads] or NULL);
 * `draw` numbers the step for the sampling selectors. */
KVS_API kvs_status kvs_selection_cache_attention(const kvs_selection_cache* cache, size_t layer, const float* queries,
                                                 size_t q_heads, uint64_t draw, float* output, float* lse);
KVS_API kvs_status kvs_selection_cache_tokens(const kvs_selection_cache* cache, size_t layer, size_t* tokens);
/* kv_bytes: the KV cache's bytes; index_bytes: the selectors' indexes (either may be NULL). */
KVS_API kvs_status kvs_selection_cache_bytes(const kvs_selection_cache* cache, size_t* kv_bytes, size_t* index_bytes);

/* The same for the sequences of a paged cache: sequences as kvs_cache's, each with its own
 * selectors, made from the same parameters (its rows plain, which the selection reads scattered). fork
 * copies the selectors. A selector indexes whole blocks before the tokens whose fp16 the policy's
 * rollback keeps, so truncate never takes back an indexed token; the rest of the body (fewer than
 * rollback + block tokens), the sinks and the window are attended exactly. */
typedef struct kvs_paged_selection kvs_paged_selection;

KVS_API kvs_status kvs_paged_selection_create(const kvs_selection_params* params, kvs_paged_selection** cache);
KVS_API void kvs_paged_selection_destroy(kvs_paged_selection* cache);
KVS_API kvs_status kvs_paged_selection_add_sequence(kvs_paged_selection* cache, uint64_t* sequence);
KVS_API kvs_status kvs_paged_selection_fork(kvs_paged_selection* cache, uint64_t source, uint64_t* sequence);
KVS_API kvs_status kvs_paged_selection_truncate(kvs_paged_selection* cache, uint64_t sequence, size_t tokens);
KVS_API kvs_status kvs_paged_selection_remove_sequence(kvs_paged_selection* cache, uint64_t sequence);
KVS_API kvs_status kvs_paged_selection_append(kvs_paged_selection* cache, uint64_t sequence, size_t layer,
                                              kvs_dtype dtype, const void* keys, const void* values, size_t tokens);
/* One decode step of a layer for a batch: queries and output [batch][q_heads][head_dim], lse
 * [batch][q_heads] or NULL; `draw` numbers the step for the sampling selectors. */
KVS_API kvs_status kvs_paged_selection_attention(const kvs_paged_selection* cache, size_t layer,
                                                 const uint64_t* sequences, size_t batch, const float* queries,
                                                 size_t q_heads, uint64_t draw, float* output, float* lse);
/* tokens: the sequence's tokens in the layer; indexed: those its selectors index (either may be NULL). */
KVS_API kvs_status kvs_paged_selection_tokens(const kvs_paged_selection* cache, uint64_t sequence, size_t layer,
                                              size_t* tokens, size_t* indexed);
/* kv_bytes: the paged cache's bytes; index_bytes: every sequence's selectors (either may be NULL). */
KVS_API kvs_status kvs_paged_selection_bytes(const kvs_paged_selection* cache, size_t* kv_bytes, size_t* index_bytes);

/* ---- The flat vector index ------------------------------------------------------------------- */
typedef struct kvs_index kvs_index;

typedef struct kvs_index_params {
  size_t size;        /* sizeof(kvs_index_params) */
  const char* codec;  /* "tq_pca:b=4" */
  const char* metric; /* "ip" (inner product), "cosine" or "l2" */
  uint64_t seed;      /* 0 */
  int threads;        /* 0: all */
} kvs_index_params;

KVS_API kvs_index_params kvs_index_default_params(void);
KVS_API kvs_status kvs_index_create(size_t dim, const kvs_index_params* params, kvs_index** index);
KVS_API void kvs_index_destroy(kvs_index* index);
/* Adds n rows (n x dim); ids may be NULL (one past the largest id added, then up). The first batch also
 * fits the index's centre and any data-dependent codec. */
KVS_API kvs_status kvs_index_add(kvs_index* index, const float* x, size_t n, const int64_t* ids);
/* ids and scores: nq x k, best first. */
KVS_API kvs_status kvs_index_search(const kvs_index* index, const float* queries, size_t nq, size_t k, int64_t* ids,
                                    float* scores);
/* *removed (may be NULL) = how many of the n ids were present. */
KVS_API kvs_status kvs_index_remove(kvs_index* index, const int64_t* ids, size_t n, size_t* removed);
KVS_API kvs_status kvs_index_size(const kvs_index* index, size_t* size);
KVS_API kvs_status kvs_index_bytes(const kvs_index* index, size_t* bytes);
KVS_API kvs_status kvs_index_save(const kvs_index* index, const char* path);
KVS_API kvs_status kvs_index_load(const char* path, kvs_index** index);

/* ---- The IVF index ---------------------------------------------------------------------------- */
typedef struct kvs_ivf_index kvs_ivf_index;

/* From a factory string: "ivf:nlist=1024,nprobe=32,metric=ip|tq_mse:b=4,rescale=1". */
KVS_API kvs_status kvs_ivf_index_create(size_t dim, const char* factory, int threads, kvs_ivf_index** index);
KVS_API void kvs_ivf_index_destroy(kvs_ivf_index* index);
/* k-means on n rows (n x dim), n >= nlist; once. */
KVS_API kvs_status kvs_ivf_index_train(kvs_ivf_index* index, const float* x, size_t n);
/* ids may be NULL: one past the largest id added so far, then up. */
KVS_API kvs_status kvs_ivf_index_add(kvs_ivf_index* index, const float* x, size_t n, const int64_t* ids);
/* ids and scores: nq x k, best first; nprobe 0: the factory's. */
KVS_API kvs_status kvs_ivf_index_search(const kvs_ivf_index* index, const float* queries, size_t nq, size_t k,
                                        size_t nprobe, int64_t* ids, float* scores);
KVS_API kvs_status kvs_ivf_index_remove(kvs_ivf_index* index, const int64_t* ids, size_t n, size_t* removed);
KVS_API kvs_status kvs_ivf_index_size(const kvs_ivf_index* index, size_t* size);
KVS_API kvs_status kvs_ivf_index_bytes(const kvs_ivf_index* index, size_t* bytes);
KVS_API kvs_status kvs_ivf_index_save(const kvs_ivf_index* index, const char* path);
KVS_API kvs_status kvs_ivf_index_load(const char* path, kvs_ivf_index** index);
/* The file mapped read-only: the lists are searched where they lie in its pages (shared between
 * processes); a list is copied into memory when it changes. The file must not change meanwhile. */
KVS_API kvs_status kvs_ivf_index_map(const char* path, kvs_ivf_index** index);

#ifdef __cplusplus
}
#endif

#endif /* KVSKETCH_KVSKETCH_H_ */

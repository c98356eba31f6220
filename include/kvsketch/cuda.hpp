// GPU kernels for TurboQuant caches (built with -DKVSKETCH_CUDA=ON; libkvsketch_cuda).
//
// What runs on the device:
//   encode      the randomized Hadamard rotation, the Lloyd-Max quantization, the packing and the
//               norm of tq_mse keys and values (of each part of a channel split), for tq_prod keys the residual's norm and the
//               signs of its sketch, for QJL keys the signs of the key's sketch and its norm: the
//               same bits as VectorCodec::encode on the CPU
//   decode      fused attention of a batch of sequences of different lengths over a paged block
//               store on the device (block tables on the device, as vLLM keeps them): keys scored
//               and values summed straight from their codes (tensor cores, fp32 accumulation), the
//               values in the rotated domain and un-rotated once per query; tokens split over
//               thread blocks and merged by log-sum-exp; fp16 sinks and window exact
//   fp16        the same decode over an fp16 block store: the baseline, of the same structure
//
// Supported: tq_mse keys and values (b = 2, 3, 4; rotation=hadamard; norm fp16; rescale=0 or 1),
// tq_prod keys (the same, with sketch=hadamard), QJL keys (m = head_dim, no outliers, norm fp16,
// any sketch), the channel splits tq_mse:b=2.5 and 3.5 as keys and values (head_dim 128, 256),
// and center: of any of them (the mean taken off before encoding; scores gain <q, mean>, value
// sums the mean times the weights), head_dim 64, 128 or 256, up to 16 query heads per KV head. Anything else is refused with an
// Error naming it. Device pointers are the caller's; every call is ordered on `stream` (a
// cudaStream_t; nullptr for the default stream).
//
//   kvsketch::cuda::DeviceLayerCodecs codecs(cache, layer);        // a PagedKVCache's codecs
//   kvsketch::cuda::DevicePagePool pool(codecs, pages, 1024);       // the block store
//   codecs.encode_into_pages(keys, values, tokens, slots, pool.view(), stream);     // append
//   kvsketch::cuda::decode_attention(codecs, pool.view(), batch, q, q_heads, out, lse, work, stream);
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kvsketch {
class VectorCodec;
class PagedKVCache;
}  // namespace kvsketch

namespace kvsketch::cuda {

// True where a CUDA device of compute capability 9.0 or later is present (the kernels are built
// for sm_90 with PTX for later devices).
bool device_available();
// "NVIDIA H200, 132 SMs, 60 MiB L2" or why no device can be used.
std::string device_description();

enum class Part { kKeys, kValues };

// One layer's block store on the device: `pages` pages of `page_tokens` tokens for every KV head.
// Within a page and head, the tokens' packed indices (the CPU rows' first bytes, unchanged) and
// then their fp16 norms: the CPU row split in two planes, so that the indices of consecutive
// tokens are one run of memory. tq_prod keys' packed bytes are the scalar indices and then the
// signs, as in the CPU row, and their residual norms (gamma) are a third plane. A channel split
// (tq_mse:b=2.5, 3.5) packs its two parts' indices one after the other and has two norms a token.
//   indices of (page p, head h, token t) at  key_indices + ((p * kv_heads + h) * page_tokens + t) * packed
//   norm k (of norms_per_token)           at  key_norms   + ((p * kv_heads + h) * page_tokens + t) * norms_per_token + k
//   gamma (tq_prod keys)                  at  key_gammas  +  (p * kv_heads + h) * page_tokens + t
struct DevicePages {
  uint8_t* key_indices = nullptr;
  uint16_t* key_norms = nullptr;
  uint16_t* key_gammas = nullptr;  // tq_prod keys only
  uint8_t* value_indices = nullptr;
  uint16_t* value_norms = nullptr;
  size_t pages = 0, page_tokens = 0;
};

// An fp16 block store of the same shape: key (page p, head h, token t) at
// keys + ((p * kv_heads + h) * page_tokens + t) * head_dim; values alike.
struct DeviceHalfPages {
  uint16_t* keys = nullptr;
  uint16_t* values = nullptr;
  size_t pages = 0, page_tokens = 0;
};

// A decode step's batch. Sequence b's encoded tokens are its first body_tokens[b] slots in the
// pages block_tables[b * max_pages_per_sequence + i]; its fp16 tokens (sinks and window, any
// order) are exact_tokens[b] rows of exact_keys/values + (b * kv_heads + h) * exact_capacity *
// head_dim. All arrays are device memory; max_body_tokens (host) bounds body_tokens and sizes the
// split of the tokens over thread blocks. Where the host copies of the counts are given, a
// sequence with no token at all, or with more body tokens than max_body_tokens or its block
// table holds, is refused; without them such a sequence reads no tokens beyond those bounds, and
// one with none gets output 0 and lse -inf.
struct DeviceBatch {
  size_t batch = 0;
  const int32_t* block_tables = nullptr;
  size_t max_pages_per_sequence = 0;
  const int32_t* body_tokens = nullptr;
  size_t max_body_tokens = 0;
  const uint16_t* exact_keys = nullptr;
  const uint16_t* exact_values = nullptr;
  const int32_t* exact_tokens = nullptr;  // may be null: no exact tokens
  size_t exact_capacity = 0;
  const int32_t* host_body_tokens = nullptr;   // optional host copies, checked
  const int32_t* host_exact_tokens = nullptr;
};

// The device tables of one layer's key and value codecs, one pair per KV head: their rotations,
// codebooks and (tq_prod and QJL keys) sketches.
class DeviceLayerCodecs {
 public:
  // keys[h] and values[h] are the codecs of KV head h (as a PagedKVCache or make_codec builds
  // them, whatever their row packing). Throws Error for any codec the kernels do not
  // support, naming it.
  DeviceLayerCodecs(const std::vector<const VectorCodec*>& keys, const std::vector<const VectorCodec*>& values);
  // The codecs of a cache's layer.
  DeviceLayerCodecs(const PagedKVCache& cache, size_t layer);
  ~DeviceLayerCodecs();
  DeviceLayerCodecs(DeviceLayerCodecs&&) noexcept;
  DeviceLayerCodecs& operator=(DeviceLayerCodecs&&) noexcept;

  size_t kv_heads() const;
  size_t head_dim() const;
  // b of the codec (tq_prod: its scalar part's b - 1 and the sign bit; QJL 1; the splits 2.5, 3.5)
  double bits(Part part) const;
  bool residual_signs() const;  // whether the keys are tq_prod
  // The fp16 norms of a token in the norm plane: 1, or 2 for a channel split (one per part).
  size_t norms_per_token(Part part) const;
  // Bytes of a token's packed indices (tq_prod: and signs), and of the CPU codec's whole row
  // (those, then the norm, then tq_prod's gamma).
  size_t packed_bytes(Part part) const;
  size_t code_bytes(Part part) const;

  // Encodes n rows (device, n x head_dim floats) with head `head`'s codec into the CPU codec's
  // rows (device, n x code_bytes): the same bits as VectorCodec::encode. Waits for the stream, and
  // throws Error naming the first row with a NaN or Inf or a norm beyond the fp16 range.
  void encode_rows(Part part, size_t head, const float* x, size_t n, uint8_t* rows, void* stream = nullptr) const;
  // An append: keys and values (device, tokens x kv_heads x head_dim floats) encoded into their
  // slots (device, tokens entries of page * page_tokens + offset). Waits for the stream and throws
  // as encode_rows does; rows before a bad one are written.
  void encode_into_pages(const float* keys, const float* values, size_t tokens, const int64_t* slots,
                         const DevicePages& pages, void* stream = nullptr) const;
  // CPU rows (device, n x code_bytes, as VectorCodec::encode writes them) of one head and part,
  // split into the page planes at their slots: the upload of a host cache's codes. Waits for the
  // stream. A slot outside the store is refused (by encode_into_pages too), naming its row.
  void store_rows(Part part, size_t head, const uint8_t* rows, size_t n, const int64_t* slots,
                  const DevicePages& pages, void* stream = nullptr) const;

  struct Tables;
  const Tables& tables() const { return *tables_; }

 private:
  std::unique_ptr<Tables> tables_;
};

// Device memory for a DevicePages store of `pages` pages, freed with it.
class DevicePagePool {
 public:
  DevicePagePool(const DeviceLayerCodecs& codecs, size_t pages, size_t page_tokens);
  ~DevicePagePool();
  DevicePagePool(const DevicePagePool&) = delete;
  DevicePagePool& operator=(const DevicePagePool&) = delete;
  const DevicePages& view() const { return view_; }
  size_t bytes() const { return bytes_; }

 private:
  DevicePages view_;
  void* memory_ = nullptr;
  size_t bytes_ = 0;
};

// Scratch of decode_attention: the partial results of the thread blocks. Grows on demand and is
// reused; one per stream.
class DecodeWorkspace {
 public:
  DecodeWorkspace();
  ~DecodeWorkspace();
  DecodeWorkspace(const DecodeWorkspace&) = delete;
  DecodeWorkspace& operator=(const DecodeWorkspace&) = delete;
  float* reserve(size_t floats);
  size_t bytes() const { return floats_ * sizeof(float); }

 private:
  float* memory_ = nullptr;
  size_t floats_ = 0;
};

// One decode step of a layer: queries [batch][q_heads][head_dim] floats (device), q_heads a
// multiple of kv_heads (query head h reads KV head h / (q_heads / kv_heads)); output the same
// shape and lse [batch][q_heads] (may be null) are device buffers of the caller. Scores are scaled
// by 1/sqrt(head_dim); lse is the natural log of the softmax's sum, as the CPU's.
void decode_attention(const DeviceLayerCodecs& codecs, const DevicePages& pages, const DeviceBatch& batch,
                      const float* queries, size_t q_heads, float* output, float* lse, DecodeWorkspace& workspace,
                      void* stream = nullptr);

// The same over an fp16 block store.
void decode_attention_fp16(size_t kv_heads, size_t head_dim, const DeviceHalfPages& pages, const DeviceBatch& batch,
                           const float* queries, size_t q_heads, float* output, float* lse,
                           DecodeWorkspace& workspace, void* stream = nullptr);

}  // namespace kvsketch::cuda

// The device, the page pool, the workspace and the decode entry points: every argument checked on
// the host before a kernel runs.
#include <cuda_runtime.h>

#include <cmath>
#include <fmt/format.h>

#include "core/require.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/device_tables.hpp"
#include "cuda/kernels.hpp"
#include "kvsketch/cuda.hpp"

namespace kvsketch::cuda {

bool device_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();  // clears the sticky "no device" error
    return false;
  }
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return false;
  return properties.major >= 9;
}

std::string device_description() {
  int count = 0;
  if (const cudaError_t error = cudaGetDeviceCount(&count); error != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device: {}", cudaGetErrorString(error));
  }
  if (count == 0) return "no CUDA device";
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, 0), "cuda: device properties");
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  return fmt::format("{}, compute capability {}.{}, {} SMs, {} MiB L2, {} GiB, runtime {}.{}, driver {}.{}",
                     properties.name, properties.major, properties.minor, properties.multiProcessorCount,
                     properties.l2CacheSize >> 20, properties.totalGlobalMem >> 30, runtime / 1000,
                     runtime % 1000 / 10, driver / 1000, driver % 1000 / 10);
}

DevicePagePool::DevicePagePool(const DeviceLayerCodecs& codecs, size_t pages, size_t page_tokens) {
  require(pages > 0, "cuda DevicePagePool: pages must be >= 1");
  check_page_tokens(page_tokens, "cuda DevicePagePool");
  const size_t slots = pages * codecs.kv_heads() * page_tokens;
  // Each plane starts 256-byte aligned, as the kernels' widest loads want.
  const auto aligned = [](size_t bytes) { return (bytes + 255) / 256 * 256; };
  const size_t key_indices = aligned(slots * codecs.packed_bytes(Part::kKeys));
  const size_t value_indices = aligned(slots * codecs.packed_bytes(Part::kValues));
  // One fp16 norm per part (two for the splits); tq_prod keys' gammas a plane of their own.
  const size_t key_norms = aligned(slots * 2 * codecs.norms_per_token(Part::kKeys));
  const size_t value_norms = aligned(slots * 2 * codecs.norms_per_token(Part::kValues));
  const size_t gammas = codecs.residual_signs() ? aligned(slots * 2) : 0;
  bytes_ = key_indices + value_indices + key_norms + value_norms + gammas;
  check_cuda(cudaMalloc(&memory_, bytes_), "cuda DevicePagePool: allocating the pages");
  auto* base = static_cast<uint8_t*>(memory_);
  view_.key_indices = base;
  view_.value_indices = base + key_indices;
  view_.key_norms = reinterpret_cast<uint16_t*>(base + key_indices + value_indices);
  view_.value_norms = reinterpret_cast<uint16_t*>(base + key_indices + value_indices + key_norms);
  if (gammas) view_.key_gammas = reinterpret_cast<uint16_t*>(base + key_indices + value_indices + key_norms + value_norms);
  view_.pages = pages;
  view_.page_tokens = page_tokens;
}

DevicePagePool::~DevicePagePool() {
  if (memory_) cudaFree(memory_);
}

DecodeWorkspace::DecodeWorkspace() = default;
DecodeWorkspace::~DecodeWorkspace() {
  if (memory_) cudaFree(memory_);
}

float* DecodeWorkspace::reserve(size_t floats) {
  if (floats <= floats_) return memory_;
  if (memory_) check_cuda(cudaFree(memory_), "cuda DecodeWorkspace: freeing");
  memory_ = nullptr;
  floats_ = 0;
  check_cuda(cudaMalloc(&memory_, floats * sizeof(float)), "cuda DecodeWorkspace: allocating");
  floats_ = floats;
  return memory_;
}

namespace {

detail::BatchView check_batch(const DeviceBatch& batch, size_t page_tokens, const char* who) {
  require(batch.batch >= 1 && batch.batch <= 65535, "{}: batch is {}; 1 to 65535 sequences", who, batch.batch);
  require(batch.body_tokens != nullptr, "{}: body_tokens is null", who);
  require(batch.max_body_tokens <= (size_t{1} << 30), "{}: max_body_tokens {} is beyond 2^30", who, batch.max_body_tokens);
  if (batch.max_body_tokens > 0) {
    require(batch.block_tables != nullptr && batch.max_pages_per_sequence > 0, "{}: body tokens but no block tables", who);
    require(batch.max_body_tokens <= batch.max_pages_per_sequence * page_tokens,
            "{}: max_body_tokens {} exceeds the {} pages x {} tokens of a block table", who, batch.max_body_tokens,
            batch.max_pages_per_sequence, page_tokens);
  }
  if (batch.exact_tokens)
    require(batch.exact_keys && batch.exact_values && batch.exact_capacity > 0,
            "{}: exact_tokens given without exact keys, values or capacity", who);
  for (size_t b = 0; batch.host_body_tokens && b < batch.batch; ++b) {
    const int32_t body = batch.host_body_tokens[b];
    const int32_t exact = batch.host_exact_tokens ? batch.host_exact_tokens[b] : 0;
    require(body >= 0 && static_cast<size_t>(body) <= batch.max_body_tokens,
            "{}: sequence {} has {} body tokens; 0 to max_body_tokens ({})", who, b, body, batch.max_body_tokens);
    require(exact >= 0 && static_cast<size_t>(exact) <= batch.exact_capacity,
            "{}: sequence {} has {} exact tokens; 0 to exact_capacity ({})", who, b, exact, batch.exact_capacity);
    require(body + exact > 0, "{}: sequence {} of the batch has no tokens", who, b);
  }
  detail::BatchView view;
  view.batch = static_cast<int>(batch.batch);
  view.block_tables = batch.block_tables;
  view.max_pages = static_cast<int>(batch.max_pages_per_sequence);
  view.body_tokens = batch.body_tokens;
  view.max_body_tokens = static_cast<int>(batch.max_body_tokens);
  view.exact_keys = batch.exact_keys;
  view.exact_values = batch.exact_values;
  view.exact_tokens = batch.exact_tokens;
  view.exact_capacity = static_cast<int>(batch.exact_capacity);
  return view;
}

detail::DecodeShape check_shape(size_t kv_heads, size_t head_dim, size_t q_heads, const float* queries, float* output,
                                const char* who) {
  require(head_dim == 64 || head_dim == 128 || head_dim == 256, "{}: head_dim {} is not supported; 64, 128 or 256", who,
          head_dim);
  require(kv_heads >= 1 && kv_heads <= 65535, "{}: kv_heads is {}", who, kv_heads);
  require(q_heads >= kv_heads && q_heads % kv_heads == 0, "{}: q_heads {} is not a multiple of kv_heads {}", who, q_heads,
          kv_heads);
  require(q_heads / kv_heads <= static_cast<size_t>(detail::kMaxGroupHeads),
          "{}: {} query heads per KV head; the kernels take at most {}", who, q_heads / kv_heads, detail::kMaxGroupHeads);
  require(queries && output, "{}: queries or output is null", who);
  detail::DecodeShape shape;
  shape.dim = static_cast<int>(head_dim);
  shape.kv_heads = static_cast<int>(kv_heads);
  shape.group = static_cast<int>(q_heads / kv_heads);
  shape.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  return shape;
}

void run_decode(const detail::DecodeShape& shape, const detail::BodyView& body, const detail::BatchView& batch,
                const float* queries, float* output, float* lse, DecodeWorkspace& workspace, void* stream,
                const char* who) {
  float* scratch = workspace.reserve(detail::decode_workspace_floats(shape, batch));
  check_cuda(detail::launch_decode(shape, body, batch, queries, output, lse, scratch, stream), who);
}

}  // namespace

void decode_attention(const DeviceLayerCodecs& codecs, const DevicePages& pages, const DeviceBatch& batch,
                      const float* queries, size_t q_heads, float* output, float* lse, DecodeWorkspace& workspace,
                      void* stream) {
  const char* who = "cuda decode_attention";
  const detail::DecodeShape shape = check_shape(codecs.kv_heads(), codecs.head_dim(), q_heads, queries, output, who);
  check_page_store(codecs, pages, who);
  const detail::BatchView view = check_batch(batch, pages.page_tokens, who);
  detail::BodyView body;
  const auto& tables = codecs.tables();
  detail::bind_keys(tables.keys, body);
  detail::bind_values(tables.values, body);
  body.key_indices = pages.key_indices;
  body.key_norms = pages.key_norms;
  body.key_gammas = pages.key_gammas;
  body.value_indices = pages.value_indices;
  body.value_norms = pages.value_norms;
  body.page_tokens = static_cast<int>(pages.page_tokens);
  run_decode(shape, body, view, queries, output, lse, workspace, stream, who);
}

void decode_attention_fp16(size_t kv_heads, size_t head_dim, const DeviceHalfPages& pages, const DeviceBatch& batch,
                           const float* queries, size_t q_heads, float* output, float* lse,
                           DecodeWorkspace& workspace, void* stream) {
  const char* who = "cuda decode_attention_fp16";
  const detail::DecodeShape shape = check_shape(kv_heads, head_dim, q_heads, queries, output, who);
  require(pages.keys && pages.values, "{}: the page store has a null plane", who);
  check_page_tokens(pages.page_tokens, who);
  const detail::BatchView view = check_batch(batch, pages.page_tokens, who);
  detail::BodyView body;
  body.key_bits = body.value_bits = 16;
  body.key_indices = reinterpret_cast<const uint8_t*>(pages.keys);
  body.value_indices = reinterpret_cast<const uint8_t*>(pages.values);
  body.page_tokens = static_cast<int>(pages.page_tokens);
  run_decode(shape, body, view, queries, output, lse, workspace, stream, who);
}

}  // namespace kvsketch::cuda

// kvsketch_cuda_bench: decode attention on the GPU, the compressed cache against the fp16 cache
// through kernels of the same structure, with the device's copy bandwidth and the encode rate.
// Prints one JSON object per line (device, bandwidth, encode, then one per batch and context)
// and a table at the end.
//
//   kvsketch_cuda_bench [--tokens 32768,65536,131072] [--batches 1,8,32,64] [--kv-heads 8]
//                       [--group 4] [--dim 128] [--keys tq_mse:b=3] [--values tq_mse:b=3]
//                       [--page 1024] [--exact 132] [--repetitions 15]
//
// Each timed call follows a write of 256 MiB that evicts the L2, so caches are read from HBM as a
// long context's are; times are medians of CUDA-event intervals. Code bytes are filled with
// random bits and norms with random fp16 values: the kernels' work does not depend on them (the
// tests check the results).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kvsketch/codec.hpp"
#include "kvsketch/cuda.hpp"

namespace {

using kvsketch::cuda::DeviceBatch;

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

__device__ inline uint32_t mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<uint32_t>(x);
}

__global__ void fill_words(uint32_t* words, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    words[i] = mix(seed * 0x9e3779b97f4a7c15ull + i);
}

// fp16 values uniform in [low, high).
__global__ void fill_halves(uint16_t* halves, size_t n, uint64_t seed, float low, float high) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 8) / 16777216.0f;
    halves[i] = __half_as_ushort(__float2half_rn(low + (high - low) * u));
  }
}

__global__ void fill_floats(float* values, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    values[i] = static_cast<float>(mix(seed * 0x9e3779b97f4a7c15ull + i) >> 8) / 8388608.0f - 1.0f;
}

constexpr unsigned kFillBlocks = 4096, kFillThreads = 256;

struct Buffer {
  void* data = nullptr;
  explicit Buffer(size_t bytes) { check(cudaMalloc(&data, std::max<size_t>(bytes, 256)), "cudaMalloc"); }
  ~Buffer() { cudaFree(data); }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data);
  }
};

std::vector<size_t> parse_list(const std::string& text) {
  std::vector<size_t> out;
  std::stringstream stream(text);
  for (std::string item; std::getline(stream, item, ',');) out.push_back(std::stoull(item));
  return out;
}

template <typename Call>
double median_microseconds(int repetitions, void* flush, size_t flush_bytes, Call&& call) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "event");
  check(cudaEventCreate(&stop), "event");
  for (int i = 0; i < 3; ++i) call();
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) {
    check(cudaMemsetAsync(flush, i, flush_bytes), "flush");
    check(cudaEventRecord(start), "record");
    call();
    check(cudaEventRecord(stop), "record");
    check(cudaEventSynchronize(stop), "sync");
    float ms = 0.0f;
    check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
    times.push_back(ms * 1000.0);
  }
  check(cudaGetLastError(), "timed call");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<size_t> contexts = {32768, 65536, 131072}, batches = {1, 8, 32, 64};
  size_t kv_heads = 8, group = 4, dim = 128, page = 1024, exact = 132;
  int repetitions = 15;
  std::string key_spec = "tq_mse:b=3", value_spec = "tq_mse:b=3";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--tokens") contexts = parse_list(value);
    else if (flag == "--batches") batches = parse_list(value);
    else if (flag == "--kv-heads") kv_heads = std::stoull(value);
    else if (flag == "--group") group = std::stoull(value);
    else if (flag == "--dim") dim = std::stoull(value);
    else if (flag == "--page") page = std::stoull(value);
    else if (flag == "--exact") exact = std::stoull(value);
    else if (flag == "--repetitions") repetitions = std::stoi(value);
    else if (flag == "--keys") key_spec = value;
    else if (flag == "--values") value_spec = value;
    else {
      std::fprintf(stderr, "unknown option %s\n", flag.c_str());
      return 2;
    }
  }
  if (!kvsketch::cuda::device_available()) {
    std::fprintf(stderr, "kvsketch_cuda_bench: %s\n", kvsketch::cuda::device_description().c_str());
    return 1;
  }
  std::printf("{\"kind\": \"device\", \"device\": \"%s\"}\n", kvsketch::cuda::device_description().c_str());

  // Copy bandwidth: bytes read plus bytes written by a device-to-device copy of 4 GiB.
  const size_t flush_bytes = size_t{256} << 20;
  Buffer flush(flush_bytes);
  double bandwidth = 0.0;
  {
    const size_t bytes = size_t{4} << 30;
    Buffer a(bytes), b(bytes);
    fill_words<<<kFillBlocks, kFillThreads>>>(a.as<uint32_t>(), bytes / 4, 1);
    const double us = median_microseconds(repetitions, flush.data, flush_bytes, [&] {
      check(cudaMemcpyAsync(b.data, a.data, bytes, cudaMemcpyDeviceToDevice), "copy");
    });
    bandwidth = 2.0 * bytes / us / 1e3;  // GB/s
    std::printf("{\"kind\": \"bandwidth\", \"copy_bytes\": %zu, \"GBps\": %.1f}\n", bytes, bandwidth);
  }

  std::vector<std::unique_ptr<kvsketch::VectorCodec>> owned;
  std::vector<const kvsketch::VectorCodec*> keys, values;
  for (size_t h = 0; h < kv_heads; ++h) {
    owned.push_back(kvsketch::make_codec(key_spec, dim, 2 * h + 1));
    keys.push_back(owned.back().get());
    owned.push_back(kvsketch::make_codec(value_spec, dim, 2 * h + 2));
    values.push_back(owned.back().get());
  }
  const kvsketch::cuda::DeviceLayerCodecs codecs(keys, values);

  // Encode: 512k tokens of keys and values, every KV head, into pages.
  {
    const size_t tokens = 524288, rows = tokens * kv_heads;
    Buffer x(rows * dim * sizeof(float)), slots(tokens * sizeof(int64_t));
    fill_floats<<<kFillBlocks, kFillThreads>>>(x.as<float>(), rows * dim, 2);
    std::vector<int64_t> host_slots(tokens);
    for (size_t i = 0; i < tokens; ++i) host_slots[i] = static_cast<int64_t>(i);
    check(cudaMemcpy(slots.data, host_slots.data(), tokens * sizeof(int64_t), cudaMemcpyHostToDevice), "slots");
    const kvsketch::cuda::DevicePagePool pool(codecs, (tokens + page - 1) / page, page);
    std::vector<double> seconds;
    for (int i = 0; i < 5; ++i) {
      const auto start = std::chrono::steady_clock::now();
      codecs.encode_into_pages(x.as<float>(), x.as<float>(), tokens, slots.as<int64_t>(), pool.view());
      seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(seconds.begin(), seconds.end());
    std::printf("{\"kind\": \"encode\", \"dim\": %zu, \"keys\": \"%s\", \"values\": \"%s\", \"vectors\": %zu, "
                "\"vectors_per_s\": %.4g}\n",
                dim, key_spec.c_str(), value_spec.c_str(), 2 * rows, 2.0 * rows / seconds[2]);
  }

  struct Row {
    size_t batch, tokens;
    double fp16_us, tq_us, fp16_share;
  };
  std::vector<Row> table;
  const size_t q_heads = kv_heads * group;
  for (size_t batch : batches)
    for (size_t tokens : contexts) {
      const size_t body_tq = tokens > exact ? tokens - exact : 0;
      const size_t pages_per_sequence = (tokens + page - 1) / page;
      const size_t pages = batch * pages_per_sequence;
      const size_t half_bytes = pages * kv_heads * page * dim * 2 * 2;
      const size_t code_bytes = pages * kv_heads * page * (codecs.code_bytes(kvsketch::cuda::Part::kKeys) +
                                                           codecs.code_bytes(kvsketch::cuda::Part::kValues));
      size_t free = 0, total = 0;
      check(cudaMemGetInfo(&free, &total), "memory");
      if (half_bytes + code_bytes + (size_t{2} << 30) > free) {
        std::printf("{\"kind\": \"skipped\", \"batch\": %zu, \"tokens\": %zu, \"needs_bytes\": %zu}\n", batch, tokens,
                    half_bytes + code_bytes);
        continue;
      }
      // Pages of the sequences interleaved: sequence b's page i is page i * batch + b.
      std::vector<int32_t> tables(batch * pages_per_sequence), body_half(batch, static_cast<int32_t>(tokens)),
          body_codes(batch, static_cast<int32_t>(body_tq)), exact_counts(batch, static_cast<int32_t>(tokens - body_tq));
      for (size_t b = 0; b < batch; ++b)
        for (size_t i = 0; i < pages_per_sequence; ++i)
          tables[b * pages_per_sequence + i] = static_cast<int32_t>(i * batch + b);
      Buffer device_tables(tables.size() * 4), device_half_body(batch * 4), device_code_body(batch * 4),
          device_exact(batch * 4);
      check(cudaMemcpy(device_tables.data, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice), "tables");
      check(cudaMemcpy(device_half_body.data, body_half.data(), batch * 4, cudaMemcpyHostToDevice), "lengths");
      check(cudaMemcpy(device_code_body.data, body_codes.data(), batch * 4, cudaMemcpyHostToDevice), "lengths");
      check(cudaMemcpy(device_exact.data, exact_counts.data(), batch * 4, cudaMemcpyHostToDevice), "lengths");
      Buffer queries(batch * q_heads * dim * 4), output(batch * q_heads * dim * 4), lse(batch * q_heads * 4);
      fill_floats<<<kFillBlocks, kFillThreads>>>(queries.as<float>(), batch * q_heads * dim, 3);
      kvsketch::cuda::DecodeWorkspace workspace;

      double fp16_us = 0.0;
      {
        Buffer half_keys(half_bytes / 2), half_values(half_bytes / 2);
        fill_halves<<<kFillBlocks, kFillThreads>>>(half_keys.as<uint16_t>(), half_bytes / 4, 4, -2.0f, 2.0f);
        fill_halves<<<kFillBlocks, kFillThreads>>>(half_values.as<uint16_t>(), half_bytes / 4, 5, -1.0f, 1.0f);
        kvsketch::cuda::DeviceHalfPages store;
        store.keys = half_keys.as<uint16_t>();
        store.values = half_values.as<uint16_t>();
        store.pages = pages;
        store.page_tokens = page;
        DeviceBatch view;
        view.batch = batch;
        view.block_tables = device_tables.as<int32_t>();
        view.max_pages_per_sequence = pages_per_sequence;
        view.body_tokens = device_half_body.as<int32_t>();
        view.max_body_tokens = tokens;
        fp16_us = median_microseconds(repetitions, flush.data, flush_bytes, [&] {
          kvsketch::cuda::decode_attention_fp16(kv_heads, dim, store, view, queries.as<float>(), q_heads,
                                                output.as<float>(), lse.as<float>(), workspace);
        });
      }
      double tq_us = 0.0;
      {
        const kvsketch::cuda::DevicePagePool pool(codecs, pages, page);
        const auto& v = pool.view();
        const size_t slots = pages * kv_heads * page;
        fill_words<<<kFillBlocks, kFillThreads>>>(reinterpret_cast<uint32_t*>(v.key_indices),
                                                  slots * codecs.packed_bytes(kvsketch::cuda::Part::kKeys) / 4, 6);
        fill_words<<<kFillBlocks, kFillThreads>>>(reinterpret_cast<uint32_t*>(v.value_indices),
                                                  slots * codecs.packed_bytes(kvsketch::cuda::Part::kValues) / 4, 7);
        fill_halves<<<kFillBlocks, kFillThreads>>>(
            v.key_norms, slots * codecs.norms_per_token(kvsketch::cuda::Part::kKeys), 8, 5.0f, 20.0f);
        fill_halves<<<kFillBlocks, kFillThreads>>>(
            v.value_norms, slots * codecs.norms_per_token(kvsketch::cuda::Part::kValues), 9, 5.0f, 20.0f);
        if (v.key_gammas) fill_halves<<<kFillBlocks, kFillThreads>>>(v.key_gammas, slots, 12, 0.1f, 0.5f);
        const size_t exact_values = batch * kv_heads * exact * dim;
        Buffer exact_keys(exact_values * 2), exact_vals(exact_values * 2);
        fill_halves<<<kFillBlocks, kFillThreads>>>(exact_keys.as<uint16_t>(), exact_values, 10, -2.0f, 2.0f);
        fill_halves<<<kFillBlocks, kFillThreads>>>(exact_vals.as<uint16_t>(), exact_values, 11, -1.0f, 1.0f);
        DeviceBatch view;
        view.batch = batch;
        view.block_tables = device_tables.as<int32_t>();
        view.max_pages_per_sequence = pages_per_sequence;
        view.body_tokens = device_code_body.as<int32_t>();
        view.max_body_tokens = body_tq;
        view.exact_keys = exact_keys.as<uint16_t>();
        view.exact_values = exact_vals.as<uint16_t>();
        view.exact_tokens = device_exact.as<int32_t>();
        view.exact_capacity = exact;
        tq_us = median_microseconds(repetitions, flush.data, flush_bytes, [&] {
          kvsketch::cuda::decode_attention(codecs, pool.view(), view, queries.as<float>(), q_heads, output.as<float>(),
                                           lse.as<float>(), workspace);
        });
      }
      const double fp16_bytes = static_cast<double>(batch) * tokens * kv_heads * dim * 2 * 2;
      const double tq_bytes =
          static_cast<double>(batch) * kv_heads *
          (body_tq * static_cast<double>(codecs.code_bytes(kvsketch::cuda::Part::kKeys) +
                                         codecs.code_bytes(kvsketch::cuda::Part::kValues)) +
           (tokens - body_tq) * dim * 2.0 * 2.0);
      const double fp16_gbps = fp16_bytes / fp16_us / 1e3, share = fp16_gbps / bandwidth;
      std::printf("{\"kind\": \"decode\", \"batch\": %zu, \"tokens\": %zu, \"kv_heads\": %zu, \"q_heads\": %zu, "
                  "\"dim\": %zu, \"keys\": \"%s\", \"values\": \"%s\", \"page\": %zu, \"fp16_us\": %.2f, "
                  "\"tq_us\": %.2f, \"speedup\": %.3f, \"fp16_GBps\": %.1f, \"fp16_of_copy_bandwidth\": %.3f, "
                  "\"tq_GBps\": %.1f, \"tq_bytes_over_fp16\": %.4f}\n",
                  batch, tokens, kv_heads, q_heads, dim, key_spec.c_str(), value_spec.c_str(), page, fp16_us, tq_us,
                  fp16_us / tq_us, fp16_gbps, share, tq_bytes / tq_us / 1e3, tq_bytes / fp16_bytes);
      std::fflush(stdout);
      table.push_back({batch, tokens, fp16_us, tq_us, share});
    }
  std::printf("\n%6s %8s %12s %12s %8s %10s\n", "batch", "tokens", "fp16 us", "tq us", "speedup", "fp16 %bw");
  for (const Row& row : table)
    std::printf("%6zu %8zu %12.1f %12.1f %8.2f %9.0f%%\n", row.batch, row.tokens, row.fp16_us, row.tq_us,
                row.fp16_us / row.tq_us, 100.0 * row.fp16_share);
  return 0;
}

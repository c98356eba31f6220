// The CUDA kernels against the CPU: encode bit for bit, decode attention against PagedKVCache's
// own decode of the same cache (float arithmetic) and against exact attention for the fp16 body,
// and the refusals. Tests that need a device skip themselves where none is (the refusals that are
// checked before any device call run everywhere).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kvsketch/codec.hpp"
#include "kvsketch/cuda.hpp"
#include "kvsketch/error.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/paged_cache.hpp"
#include "mirrored_cache.hpp"
#include "test_rows.hpp"

namespace kvsketch::cuda {
namespace {

#define SKIP_WITHOUT_DEVICE() \
  if (!device_available()) GTEST_SKIP() << device_description()

void check(cudaError_t status, const char* what) {
  ASSERT_EQ(status, cudaSuccess) << what << ": " << cudaGetErrorString(status);
}

// A device copy of a host vector, read back with host().
template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(const std::vector<T>& host) : size_(host.size()) {
    check(cudaMalloc(&data_, std::max<size_t>(1, size_) * sizeof(T)), "cudaMalloc");
    if (size_) check(cudaMemcpy(data_, host.data(), size_ * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  explicit DeviceArray(size_t size) : DeviceArray(std::vector<T>(size)) {}
  ~DeviceArray() { cudaFree(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  std::vector<T> host() const {
    std::vector<T> out(size_);
    if (size_) check(cudaMemcpy(out.data(), data_, size_ * sizeof(T), cudaMemcpyDeviceToHost), "download");
    return out;
  }

 private:
  T* data_ = nullptr;
  size_t size_;
};

TEST(CudaEncode, GivesTheCpuCodecsBits) {
  SKIP_WITHOUT_DEVICE();
  const size_t n = 701;
  for (size_t dim : {64, 128, 256})
    for (const char* spec : {"tq_mse:b=2", "tq_mse:b=3", "tq_mse:b=4", "tq_mse:b=3,rescale=1", "tq_mse:b=4,rescale=1",
                             "tq_mse:b=2,rounds=3", "tq_prod:b=2", "tq_prod:b=3", "tq_prod:b=4", "tq_prod:b=3,rounds=3",
                             "qjl", "qjl:sketch=hadamard", "qjl:sketch=gaussian", "tq_mse:b=2.5", "tq_mse:b=3.5"})
      for (uint64_t seed : {1u, 77u}) {
        if (std::string(spec).find(".5") != std::string::npos && dim == 64) continue;  // refused
        const auto codec = make_codec(spec, dim, seed);
        const std::vector<float> rows = rows_of_every_kind(n, dim, seed + dim);
        codec->calibrate(rows.data(), n);  // a split's channels, permuted
        const auto values = make_codec("tq_mse:b=3", dim, seed);
        const DeviceLayerCodecs device({codec.get()}, {values.get()});
        CodeBuffer expected(codec->code_bytes());
        codec->encode(rows.data(), n, expected);
        ASSERT_EQ(device.code_bytes(Part::kKeys), codec->code_bytes()) << spec;
        const DeviceArray<float> x(rows);
        const DeviceArray<uint8_t> codes(n * codec->code_bytes());
        device.encode_rows(Part::kKeys, 0, x.get(), n, codes.get());
        const std::vector<uint8_t> got = codes.host();
        for (size_t i = 0; i < n; ++i)
          ASSERT_EQ(std::memcmp(got.data() + i * codec->code_bytes(), expected.row(i), codec->code_bytes()), 0)
              << spec << " dim " << dim << " seed " << seed << ": row " << i << " differs";
      }
}

TEST(CudaEncode, NamesTheRowItCannotEncode) {
  SKIP_WITHOUT_DEVICE();
  const auto codec = make_codec("tq_mse:b=3", 128, 5);
  const DeviceLayerCodecs device({codec.get()}, {codec.get()});
  std::vector<float> rows = rows_of_every_kind(40, 128, 3);
  rows[17 * 128 + 9] = std::nanf("");
  rows[30 * 128] = 1e30f;  // a norm beyond fp16
  const DeviceArray<float> x(rows);
  const DeviceArray<uint8_t> codes(40 * codec->code_bytes());
  try {
    device.encode_rows(Part::kKeys, 0, x.get(), 40, codes.get());
    FAIL() << "a NaN was encoded";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("row 17"), std::string::npos) << error.what();
  }
  rows[17 * 128 + 9] = 0.0f;
  const DeviceArray<float> y(rows);
  EXPECT_THROW(device.encode_rows(Part::kKeys, 0, y.get(), 40, codes.get()), Error);
}




TEST(CudaDecode, EqualsTheCpuCacheOnTheSameCodes) {
  SKIP_WITHOUT_DEVICE();
  const std::vector<DecodeCase> cases = {
      {2, 128, 8, "tq_mse:b=3|sinks=4|window=32|block=16", 64},
      {2, 128, 16, "tq_mse:b=3,rescale=1|tq_mse:b=3|sinks=4|window=32|block=16", 32},
      {1, 64, 1, "tq_mse:b=2|tq_mse:b=4|sinks=4|window=16|block=16", 48},
      {2, 256, 6, "tq_mse:b=4|tq_mse:b=2|sinks=0|window=16|block=16", 64},
      {3, 128, 9, "tq_mse:b=4,rescale=1|tq_mse:b=3|sinks=4|window=128|block=32", 1024},
      {2, 128, 8, "tq_prod:b=3|tq_mse:b=3|sinks=4|window=32|block=16", 64},
      {1, 64, 4, "tq_prod:b=2|tq_mse:b=4|sinks=0|window=16|block=16", 32},
      {2, 256, 4, "tq_prod:b=4|tq_mse:b=2|sinks=4|window=16|block=16", 64},
      {2, 128, 8, "qjl|tq_mse:b=3|sinks=4|window=32|block=16", 64},
      {1, 64, 2, "qjl:sketch=hadamard|tq_mse:b=4|sinks=0|window=16|block=16", 32},
      {2, 128, 8, "tq_mse:b=2.5|tq_mse:b=2.5|sinks=4|window=32|block=16", 64},
      {2, 128, 4, "tq_mse:b=3.5,rescale=1|tq_mse:b=2.5|sinks=4|window=32|block=16", 128},
      {1, 256, 6, "tq_mse:b=2.5|tq_mse:b=3.5|sinks=0|window=16|block=16", 64},
      {2, 128, 8, "center:tq_mse:b=4,rescale=1|center:tq_mse:b=3,rescale=1|sinks=4|window=32|block=16", 64},
      {1, 128, 4, "center:tq_mse:b=3.5,rescale=1|sinks=4|window=16|block=16", 128},
  };
  for (const DecodeCase& c : cases) {
    const MirroredCache m(c.kv_heads, c.dim, c.q_heads, c.policy, {3, 37, 300, 1000, 2100, 4100}, 11);
    const DeviceMirror mirror(m, c.page);
    const size_t batch = m.lengths.size();
    const CpuDecode cpu(m);

    const DeviceLayerCodecs codecs(m.cache, 0);
    const DevicePagePool pool(codecs, mirror.pages, c.page);
    const DeviceArray<float> body_keys(mirror.body_keys), body_values(mirror.body_values);
    const DeviceArray<int64_t> slots(mirror.slots);
    codecs.encode_into_pages(body_keys.get(), body_values.get(), mirror.slots.size(), slots.get(), pool.view());
    const DeviceArray<int32_t> tables(mirror.tables), body(mirror.body), exact(mirror.exact);
    const DeviceArray<uint16_t> exact_keys(mirror.exact_keys), exact_values(mirror.exact_values);
    DeviceBatch view;
    view.batch = batch;
    view.block_tables = tables.get();
    view.max_pages_per_sequence = mirror.max_pages;
    view.body_tokens = body.get();
    view.max_body_tokens = mirror.max_body;
    view.exact_keys = exact_keys.get();
    view.exact_values = exact_values.get();
    view.exact_tokens = exact.get();
    view.exact_capacity = mirror.capacity;
    view.host_body_tokens = mirror.body.data();
    view.host_exact_tokens = mirror.exact.data();
    const DeviceArray<float> q(cpu.queries), output(cpu.queries.size()), lse(batch * c.q_heads);
    DecodeWorkspace workspace;
    decode_attention(codecs, pool.view(), view, q.get(), c.q_heads, output.get(), lse.get(), workspace);
    check(cudaDeviceSynchronize(), "decode");
    cpu.expect_close("cuda", c.policy, m, output.host(), lse.host());
  }
}

TEST(CudaDecode, Fp16BodyEqualsExactAttention) {
  SKIP_WITHOUT_DEVICE();
  const size_t kv_heads = 2, dim = 128, q_heads = 8, page = 32, group = q_heads / kv_heads;
  const std::vector<size_t> lengths = {1, 20, 33, 700};
  const size_t batch = lengths.size(), max_pages = (700 + page - 1) / page;
  std::vector<int32_t> tables(batch * max_pages), body(lengths.begin(), lengths.end());
  std::vector<uint16_t> keys, values;
  std::vector<std::vector<float>> rounded_keys(batch), rounded_values(batch);
  size_t pages = 0;
  std::mt19937_64 random(9);
  std::normal_distribution<float> normal;
  for (size_t b = 0; b < batch; ++b) {
    for (size_t p = 0; p < (lengths[b] + page - 1) / page; ++p) tables[b * max_pages + p] = static_cast<int32_t>(pages++);
    rounded_keys[b].resize(lengths[b] * kv_heads * dim);
    rounded_values[b].resize(rounded_keys[b].size());
  }
  keys.assign(pages * kv_heads * page * dim, 0);
  values.assign(keys.size(), 0);
  for (size_t b = 0; b < batch; ++b)
    for (size_t t = 0; t < lengths[b]; ++t)
      for (size_t h = 0; h < kv_heads; ++h)
        for (size_t j = 0; j < dim; ++j) {
          const uint16_t k = float_to_half(2.0f * normal(random)), v = float_to_half(normal(random));
          const size_t plane = (static_cast<size_t>(tables[b * max_pages + t / page]) * kv_heads + h) * page + t % page;
          keys[plane * dim + j] = k;
          values[plane * dim + j] = v;
          rounded_keys[b][(t * kv_heads + h) * dim + j] = half_to_float(k);
          rounded_values[b][(t * kv_heads + h) * dim + j] = half_to_float(v);
        }
  const std::vector<float> queries = random_queries(batch * q_heads * dim, 6);
  const DeviceArray<uint16_t> device_keys(keys), device_values(values);
  const DeviceArray<int32_t> device_tables(tables), device_body(body);
  DeviceHalfPages store;
  store.keys = device_keys.get();
  store.values = device_values.get();
  store.pages = pages;
  store.page_tokens = page;
  DeviceBatch view;
  view.batch = batch;
  view.block_tables = device_tables.get();
  view.max_pages_per_sequence = max_pages;
  view.body_tokens = device_body.get();
  view.max_body_tokens = 700;
  const DeviceArray<float> q(queries), output(queries.size()), lse(batch * q_heads);
  DecodeWorkspace workspace;
  decode_attention_fp16(kv_heads, dim, store, view, q.get(), q_heads, output.get(), lse.get(), workspace);
  const std::vector<float> got = output.host(), got_lse = lse.host();
  for (size_t b = 0; b < batch; ++b)
    for (size_t qh = 0; qh < q_heads; ++qh) {
      const size_t h = qh / group;
      const float* query = queries.data() + (b * q_heads + qh) * dim;
      std::vector<double> scores(lengths[b]);
      double best = -INFINITY;
      for (size_t t = 0; t < lengths[b]; ++t) {
        double dot = 0.0;
        for (size_t j = 0; j < dim; ++j) dot += static_cast<double>(query[j]) * rounded_keys[b][(t * kv_heads + h) * dim + j];
        scores[t] = dot / std::sqrt(static_cast<double>(dim));
        best = std::max(best, scores[t]);
      }
      double sum = 0.0;
      std::vector<double> out(dim, 0.0);
      for (size_t t = 0; t < lengths[b]; ++t) {
        const double p = std::exp(scores[t] - best);
        sum += p;
        for (size_t j = 0; j < dim; ++j) out[j] += p * rounded_values[b][(t * kv_heads + h) * dim + j];
      }
      std::vector<float> expected(dim);
      for (size_t j = 0; j < dim; ++j) expected[j] = static_cast<float>(out[j] / sum);
      EXPECT_LT(relative_error(got.data() + (b * q_heads + qh) * dim, expected.data(), dim), 3e-3)
          << "sequence " << b << " head " << qh;
      EXPECT_NEAR(got_lse[b * q_heads + qh], best + std::log(sum), 3e-3 * std::max(1.0, std::abs(best)));
    }
}

TEST(CudaRefusals, CodecsTheKernelsDoNotTake) {
  for (const auto& [spec, dim, fragment] : std::vector<std::tuple<std::string, size_t, std::string>>{
           {"tq_mse:b=3", 96, "head_dim 96"},
           {"tq_prod:b=3", 128, "tq_prod is for keys"},
           {"tq_prod:b=3,sketch=gaussian", 128, "sketch=hadamard"},
           {"qjl", 128, "qjl are for keys"},
           {"tq_mse:b=2.5", 64, "head_dim 128 and 256"},
           {"split:tq_mse:b=3@64+tq_mse:b=2", 128, "splits of tq_mse:b=2.5 and b=3.5"},
           {"tq_prod:b=2.5", 128, "splits of tq_mse:b=2.5 and b=3.5"},
           {"tq_mse:b=1.5", 128, "splits of tq_mse:b=2.5 and b=3.5"},
           {"center:q4_0", 128, "or center: of them"},
           {"qjl:m=256", 128, "m = head_dim"},
           {"qjl:outliers=8", 128, "without outliers"},
           {"tq_mse:b=3,rotation=haar", 128, "rotation=hadamard"},
           {"tq_mse:b=5", 128, "b = 2, 3 or 4"},
           {"tq_mse:b=3,norm=fp32", 128, "norm=fp16"},
           {"int8", 128, "tq_mse"}}) {
    const auto codec = make_codec(spec, dim, 1);
    try {
      DeviceLayerCodecs device({codec.get()}, {codec.get()});
      FAIL() << spec << " was taken";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    }
  }
  const auto a = make_codec("tq_mse:b=3", 128, 1), b = make_codec("tq_mse:b=4", 128, 2);
  EXPECT_THROW(DeviceLayerCodecs({a.get(), b.get()}, {a.get(), a.get()}), Error);  // heads differ
  EXPECT_THROW(DeviceLayerCodecs({a.get()}, {a.get(), a.get()}), Error);           // counts differ
}

TEST(CudaRefusals, BatchesAndShapesTheKernelsDoNotTake) {
  // Checked on the host before any device call.
  const int32_t tables[2] = {0, 1}, body[2] = {0, 5}, exact[2] = {0, 0};
  DeviceHalfPages store;
  store.keys = store.values = reinterpret_cast<uint16_t*>(0x1000);
  store.pages = 2;
  store.page_tokens = 16;
  DeviceBatch batch;
  batch.batch = 2;
  batch.block_tables = tables;
  batch.max_pages_per_sequence = 1;
  batch.body_tokens = body;
  batch.max_body_tokens = 5;
  batch.host_body_tokens = body;
  batch.host_exact_tokens = exact;
  batch.exact_tokens = exact;
  batch.exact_keys = batch.exact_values = reinterpret_cast<const uint16_t*>(0x1000);
  batch.exact_capacity = 4;
  DecodeWorkspace workspace;
  float* any = reinterpret_cast<float*>(0x1000);
  const auto refusal = [&](size_t kv_heads, size_t dim, size_t q_heads, const DeviceBatch& b) {
    try {
      decode_attention_fp16(kv_heads, dim, store, b, any, q_heads, any, nullptr, workspace);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refusal(2, 128, 4, batch).find("sequence 0 of the batch has no tokens"), std::string::npos);
  DeviceBatch filled = batch;
  const int32_t both[2] = {3, 5};
  filled.host_body_tokens = both;
  EXPECT_NE(refusal(2, 96, 4, filled).find("head_dim 96"), std::string::npos);
  EXPECT_NE(refusal(2, 128, 5, filled).find("not a multiple"), std::string::npos);
  EXPECT_NE(refusal(1, 128, 17, filled).find("at most 16"), std::string::npos);
  DeviceBatch beyond = filled;
  beyond.max_body_tokens = 17;  // more than one page of 16
  EXPECT_NE(refusal(2, 128, 4, beyond).find("exceeds"), std::string::npos);
  DeviceBatch odd = filled;
  DeviceHalfPages odd_pages = store;
  odd_pages.page_tokens = 20;
  try {
    decode_attention_fp16(2, 128, odd_pages, odd, any, 4, any, nullptr, workspace);
    FAIL() << "page_tokens 20 was taken";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("multiple of 16"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace kvsketch::cuda

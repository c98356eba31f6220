// Codec throughput on one thread: encode (vectors/s), scoring one query against many codes
// (code coordinates/s), and the memory read bandwidth of the same machine for reference.
//   build/kvsketch_bench_codecs --benchmark_format=json
// Set KVSKETCH_TARGET=AVX2 (or SSE4, SCALAR) to measure another instruction set than the best.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>

#include "codec/codec_base.hpp"
#include "kvsketch/bitpack.hpp"
#include "kvsketch/codebook.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/random.hpp"
#include "kvsketch/transform.hpp"
#include "simd/attention_kernels.hpp"
#include "simd/int_index_kernels.hpp"
#include "simd/kernels.hpp"
#include "simd/quantizer_grid.hpp"

namespace {

std::vector<float> gaussian(size_t count, uint64_t seed) {
  kvsketch::RandomStream stream(seed);
  std::vector<float> values(count);
  for (auto& v : values) v = static_cast<float>(stream.gaussian());
  return values;
}

void BM_Encode(benchmark::State& state, const std::string& spec, size_t dim) {
  const size_t n = 4096;
  auto codec = kvsketch::make_codec(spec, dim, 1);
  const auto x = gaussian(n * dim, 2);
  auto codes = codec->make_buffer();
  for (auto _ : state) {
    codes.clear();
    codec->encode(x.data(), n, codes);
    benchmark::DoNotOptimize(codes.data().data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  state.counters["code_bytes"] = static_cast<double>(codec->code_bytes());
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// The one-query benchmarks' input: n Gaussian rows of dim, encoded.
struct EncodedRows {
  std::unique_ptr<kvsketch::VectorCodec> codec;
  kvsketch::CodeBuffer codes;
};

EncodedRows encoded_rows(const std::string& spec, size_t dim, size_t n) {
  auto codec = kvsketch::make_codec(spec, dim, 1);
  kvsketch::CodeBuffer codes = codec->make_buffer();
  const auto x = gaussian(n * dim, 3);
  codec->encode(x.data(), n, codes);
  return {std::move(codec), std::move(codes)};
}

// items = code coordinates read; bytes = code bytes read.
void count_rows(benchmark::State& state, const EncodedRows& rows, size_t n, size_t dim) {
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n * dim));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * rows.codes.bytes()));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

void BM_Scores(benchmark::State& state, const std::string& spec, size_t dim) {
  const size_t n = 100000;
  const EncodedRows rows = encoded_rows(spec, dim, n);
  const auto q = gaussian(dim, 4);
  auto prepared = rows.codec->prepare(q.data());
  std::vector<float> out(n);
  for (auto _ : state) {
    rows.codec->scores(*prepared, rows.codes, 0, n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  count_rows(state, rows, n, dim);
}

// One query's weighted sum of the rows (codec->accumulate, into the codec's accumulator).
void BM_Accumulate(benchmark::State& state, const std::string& spec, size_t dim) {
  const size_t n = 100000;
  const EncodedRows rows = encoded_rows(spec, dim, n);
  auto weights = gaussian(n, 5);
  for (float& w : weights) w = std::abs(w);
  std::vector<float> accumulator(codec_base(*rows.codec).accumulator_size());
  for (auto _ : state) {
    rows.codec->accumulate(weights.data(), rows.codes, 0, n, accumulator.data());
    benchmark::DoNotOptimize(accumulator.data());
  }
  count_rows(state, rows, n, dim);
}

// One rotated vector of 1536 coordinates to 4-bit indices: the boundary search against the
// grid (quantizer_grid.hpp) that the encoder uses on 8-lane targets. Items = coordinates.
void BM_Quantize(benchmark::State& state, bool grid) {
  const size_t dim = 1536;
  const auto& book = kvsketch::lloyd_max_codebook(kvsketch::CoordinateLaw::kBeta, dim, 4);
  const auto table = kvsketch::simd::make_quantizer_grid(book.boundaries.data(), 4);
  auto x = gaussian(dim, 5);
  for (float& v : x) v /= 40.0f;  // about 1 / sqrt(dim): a rotated unit vector's scale
  std::vector<uint8_t> indices(dim);
  for (auto _ : state) {
    kvsketch::simd::quantize(x.data(), dim, book.boundaries.data(), 4, indices.data(), grid ? &table : nullptr);
    benchmark::DoNotOptimize(indices.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * dim));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// The rescaled encoder's step after the rotation: indices, packed codes and <x, codeword> of one
// rotated vector (simd::quantize_pack_dot; one pass on AVX2). Items = coordinates.
void BM_QuantizePackDot(benchmark::State& state) {
  const size_t dim = 1536;
  const auto& book = kvsketch::lloyd_max_codebook(kvsketch::CoordinateLaw::kBeta, dim, 4);
  const auto grid = kvsketch::simd::make_quantizer_grid(book.boundaries.data(), 4);
  auto x = gaussian(dim, 5);
  for (float& v : x) v /= 40.0f;
  std::vector<uint8_t> packed(dim / 2), scratch(dim);
  for (auto _ : state) {
    benchmark::DoNotOptimize(kvsketch::simd::quantize_pack_dot(x.data(), dim, book.boundaries.data(), 4, &grid,
                                                               book.centroids.data(), book.centroids.size(),
                                                               packed.data(), scratch.data()));
    benchmark::DoNotOptimize(packed.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * dim));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// The encoder's rotation of one vector (two rounds of randomized Hadamard, over two overlapping
// windows of 1,024 at d = 1,536), scaled to unit length on the way as the encoder does.
void BM_Rotate(benchmark::State& state) {
  const size_t dim = static_cast<size_t>(state.range(0));
  const auto rotation = kvsketch::make_rotation(kvsketch::RotationKind::kHadamard, dim, 1);
  const auto x = gaussian(dim, 8);
  std::vector<float> out(dim);
  for (auto _ : state) {
    rotation->apply_scaled(x.data(), 0.025f, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * dim));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// The integer attention kernels over n cache-resident rows of b-bit indices (fp16 norm per row) for
// one GQA group of 4 heads: scores, or the weighted sum. Items = rows. n = 512 stays in L1 (the
// instructions' own cost), 16,384 in L2.
void BM_IntIndexKernel(benchmark::State& state, int bits, size_t dim, bool weighted_sum) {
  const size_t n = static_cast<size_t>(state.range(0)), heads = 4;
  const auto& table = kvsketch::lloyd_max_codebook(kvsketch::CoordinateLaw::kBeta, dim, bits).centroids;
  const size_t stride = kvsketch::packed_bytes(dim, bits) + 2;
  std::vector<uint8_t> codes(n * stride);
  kvsketch::RandomStream stream(6);
  for (auto& c : codes) c = static_cast<uint8_t>(stream.next_u64());
  for (size_t i = 0; i < n; ++i) {  // norms: fp16 1.0
    codes[i * stride + stride - 2] = 0x00;
    codes[i * stride + stride - 1] = 0x3C;
  }
  const kvsketch::simd::RowSource rows{kvsketch::simd::RowFormat::kIndex, codes.data(), stride, dim, bits,
                                       table.data(), stride};
  const kvsketch::simd::RowFactor norms{kvsketch::packed_bytes(dim, bits), true};
  const auto queries = gaussian(heads * dim, 7);
  std::vector<float> weights(heads * n, 1.0f / static_cast<float>(n)), out(heads * n), acc(heads * dim);
  for (auto _ : state) {
    if (weighted_sum)
      kvsketch::simd::int_index_weighted_sum(rows, n, weights.data(), heads, n, acc.data(), dim, &norms);
    else
      kvsketch::simd::int_index_scores(rows, n, queries.data(), heads, 0.088f, out.data(), n, &norms);
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// The fp16 baseline's two kernels over n cache-resident rows (d = 128) for one GQA group of 4
// heads, the counterpart of int_index above. Items = rows.
void BM_HalfRowKernel(benchmark::State& state, bool weighted_sum) {
  const size_t n = static_cast<size_t>(state.range(0)), dim = 128, heads = 4;
  const auto x = gaussian(n * dim, 6);
  std::vector<uint16_t> halves(n * dim);
  kvsketch::simd::float_to_half_row(x.data(), x.size(), halves.data());
  const auto queries = gaussian(heads * dim, 7);
  std::vector<float> weights(heads * n, 1.0f / static_cast<float>(n)), out(heads * n), acc(heads * dim);
  for (auto _ : state) {
    if (weighted_sum)
      kvsketch::simd::half_row_weighted_sum(weights.data(), heads, n, halves.data(), n, dim, acc.data());
    else
      kvsketch::simd::half_row_scores(queries.data(), heads, halves.data(), n, dim, 0.088f, out.data(), n);
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(acc.data());
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
  state.SetLabel(std::string(kvsketch::simd::active_target()));
}

// Reading `bytes` of memory with wide loads: the bandwidth ceiling for a scoring pass.
void BM_MemoryRead(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<float> data(bytes / 4, 1.0f);
  for (auto _ : state) {
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
    const float* p = data.data();
    for (size_t i = 0; i + 8 <= data.size(); i += 8) {
      s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
      s4 += p[i + 4]; s5 += p[i + 5]; s6 += p[i + 6]; s7 += p[i + 7];
    }
    benchmark::DoNotOptimize(s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

void register_all() {
  for (const auto& [spec, dim] : std::vector<std::pair<std::string, size_t>>{
           {"tq_mse:b=4", 128}, {"tq_prod:b=3", 128}, {"tq_mse:b=4", 1536}, {"tq_mse:b=4,rescale=1", 1536},
           {"tq_prod:b=3", 1536},
           {"qjl:m=256", 128}, {"int8", 128}})
    benchmark::RegisterBenchmark(("encode/" + spec + "/d=" + std::to_string(dim)).c_str(), BM_Encode, spec, dim)
        ->Unit(benchmark::kMillisecond);
  for (const std::string spec : {"tq_mse:b=4", "tq_mse:b=2", "tq_prod:b=3", "tq_mse:b=3", "qjl:m=256", "fp16", "int8",
                                 "q4_0", "kivi_k:b=2,group=32", "kivi_v:b=2,group=32"})
    benchmark::RegisterBenchmark(("scores/" + spec + "/d=128/n=100000").c_str(), BM_Scores, spec, size_t{128})
        ->Unit(benchmark::kMillisecond);
  for (const std::string spec : {"tq_mse:b=4", "tq_mse:b=3", "tq_prod:b=3", "qjl:m=256", "int8", "q4_0",
                                 "kivi_v:b=2,group=32"})
    benchmark::RegisterBenchmark(("accumulate/" + spec + "/d=128/n=100000").c_str(), BM_Accumulate, spec, size_t{128})
        ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("rotate/hadamard", BM_Rotate)->ArgName("d")->Arg(128)->Arg(1536)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("quantize/search/b=4/d=1536", BM_Quantize, false)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("quantize/grid/b=4/d=1536", BM_Quantize, true)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("quantize_pack_dot/b=4/d=1536", BM_QuantizePackDot)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("int_index/scores/b=3/d=128/heads=4", BM_IntIndexKernel, 3, 128, false)
      ->ArgName("n")->Arg(512)->Arg(4096)->Arg(16384)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("int_index/weighted_sum/b=3/d=128/heads=4", BM_IntIndexKernel, 3, 128, true)
      ->ArgName("n")->Arg(512)->Arg(4096)->Arg(16384)->Unit(benchmark::kMicrosecond);
  // b = 2 and 1: the two parts of tq_prod:b=3 keys (the scalar stage and the QJL signs).
  for (int bits : {2, 1})
    benchmark::RegisterBenchmark(fmt::format("int_index/scores/b={}/d=128/heads=4", bits).c_str(), BM_IntIndexKernel,
                                 bits, 128, false)
        ->ArgName("n")->Arg(16384)->Unit(benchmark::kMicrosecond);
  // The two parts of tq_mse:b=2.5 (the outlier split at d = 128): 32 channels at 3 bits, 96 at 2;
  // and head_dim 256.
  for (const auto& [bits, dim] : {std::pair{3, size_t{32}}, std::pair{2, size_t{96}}, std::pair{3, size_t{256}}})
    for (const bool weighted : {false, true})
      benchmark::RegisterBenchmark(
          fmt::format("int_index/{}/b={}/d={}/heads=4", weighted ? "weighted_sum" : "scores", bits, dim).c_str(),
          BM_IntIndexKernel, bits, dim, weighted)
          ->ArgName("n")->Arg(16384)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("half_rows/scores/d=128/heads=4", BM_HalfRowKernel, false)
      ->ArgName("n")->Arg(512)->Arg(2048)->Arg(262144)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("half_rows/weighted_sum/d=128/heads=4", BM_HalfRowKernel, true)
      ->ArgName("n")->Arg(512)->Arg(2048)->Arg(262144)->Unit(benchmark::kMicrosecond);
  // 6.6 MB = the tq_mse:b=4 codes of 100k vectors; 512 MB = far beyond any cache.
  benchmark::RegisterBenchmark("memory_read", BM_MemoryRead)->Arg(6'600'000)->Arg(512 << 20)->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
  omp_set_num_threads(1);
  kvsketch::simd::select_target_from_environment();
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

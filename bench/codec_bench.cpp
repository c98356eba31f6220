// Codec throughput on one thread: encode (vectors/s), scoring one query against many codes
// (code coordinates/s), and the memory read bandwidth of the same machine for reference.
//   build/kvsketch_bench_codecs --benchmark_format=json
// Set KVSKETCH_TARGET=AVX2 (or SSE4, SCALAR) to measure another instruction set than the best.
#include <benchmark/benchmark.h>
#include <hwy/targets.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "kvsketch/codec.hpp"
#include "kvsketch/random.hpp"
#include "simd/kernels.hpp"

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

void BM_Scores(benchmark::State& state, const std::string& spec, size_t dim) {
  const size_t n = 100000;
  auto codec = kvsketch::make_codec(spec, dim, 1);
  const auto x = gaussian(n * dim, 3);
  auto codes = codec->make_buffer();
  codec->encode(x.data(), n, codes);
  const auto q = gaussian(dim, 4);
  auto prepared = codec->prepare(q.data());
  std::vector<float> out(n);
  for (auto _ : state) {
    codec->scores(*prepared, codes, 0, n, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  // items = code coordinates scored; bytes = code bytes read.
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n * dim));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * codes.bytes()));
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
  for (const std::string spec : {"tq_mse:b=4", "tq_mse:b=2", "tq_prod:b=3", "tq_mse:b=3", "qjl:m=256", "fp16", "int8"})
    benchmark::RegisterBenchmark(("scores/" + spec + "/d=128/n=100000").c_str(), BM_Scores, spec, size_t{128})
        ->Unit(benchmark::kMillisecond);
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

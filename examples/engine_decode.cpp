// How an inference engine hosts kvsketch: one PagedKVCache for the model, sequences added as
// requests come, a prompt attended and appended in chunks, a sequence forked for a second sample,
// every decode step a batch of sequences in one call into the engine's buffers, a speculative token
// rolled back, and the cache saved and loaded.
//
//   cmake -S examples -B build-example -DCMAKE_PREFIX_PATH=/where/kvsketch/is/installed
//   cmake --build build-example && build-example/engine_decode
#include <kvsketch/calibration.hpp>
#include <kvsketch/error.hpp>
#include <kvsketch/paged_cache.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

namespace {

constexpr size_t kLayers = 4, kKVHeads = 2, kQueryHeads = 8, kHeadDim = 64;

// Stands in for the model: keys, values ([kv_heads][tokens][head_dim]) or queries of `tokens` tokens.
std::vector<float> activations(size_t heads, size_t tokens, std::mt19937& random) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(heads * tokens * kHeadDim);
  for (float& value : x) value = normal(random);
  return x;
}

}  // namespace

int main() {
  try {
    std::mt19937 random(7);
    // 3-bit keys and values, 4 fp16 sinks, a 128-token fp16 window; truncate may drop 8 tokens.
    const auto policy = kvsketch::KVPolicy::parse("tq_prod:b=3|tq_mse:b=3|rollback=8");
    kvsketch::PagedKVCache cache(kLayers, kKVHeads, kHeadDim, policy, /*seed=*/1);

    // A prompt of 2500 tokens, in chunks of 250: each chunk's queries attend the compressed past and
    // the chunk's own keys and values exactly, then the chunk is appended (as engines prefill).
    const kvsketch::SequenceId a = cache.add_sequence();
    std::vector<float> output(250 * kQueryHeads * kHeadDim), lse(250 * kQueryHeads);
    for (size_t chunk = 0; chunk < 10; ++chunk)
      for (size_t layer = 0; layer < kLayers; ++layer) {
        const auto keys = activations(kKVHeads, 250, random), values = activations(kKVHeads, 250, random);
        const auto queries = activations(kQueryHeads, 250, random);  // [250][8][64]
        cache.attend_chunk(layer, a, 250, queries.data(), kQueryHeads, keys.data(), values.data(), output.data(),
                           lse.data());
        cache.append(a, layer, keys.data(), values.data(), 250);
      }

    // A second sample of the same prompt shares its sealed pages (1024 tokens each): only the
    // unsealed page, the sinks and the window are copied.
    const kvsketch::SequenceId b = cache.fork(a);
    std::printf("after fork: %zu pages, %zu bytes (sequence a alone: %zu)\n", cache.pages(), cache.bytes(),
                cache.sequence_bytes(a));

    // Decode steps: one call per layer for the batch {a, b}, into the engine's buffers.
    const kvsketch::SequenceId batch[] = {a, b};
    std::vector<float> step_output(2 * kQueryHeads * kHeadDim), step_lse(2 * kQueryHeads);
    for (int step = 0; step < 16; ++step)
      for (size_t layer = 0; layer < kLayers; ++layer) {
        for (const kvsketch::SequenceId id : batch) {
          const auto key = activations(kKVHeads, 1, random), value = activations(kKVHeads, 1, random);
          cache.append(id, layer, key.data(), value.data(), 1);
        }
        const auto queries = activations(2 * kQueryHeads, 1, random);  // [2][8][64]
        cache.decode(layer, batch, 2, queries.data(), kQueryHeads, step_output.data(), step_lse.data());
      }

    // A rejected speculative token: drop b's last token in every layer.
    cache.truncate(b, cache.tokens(b, 0) - 1);

    // Save and load: the loaded cache answers with the same bits.
    cache.save("engine_cache.kvp");
    const kvsketch::PagedKVCache loaded = kvsketch::PagedKVCache::load("engine_cache.kvp");
    const auto queries = activations(2 * kQueryHeads, 1, random);
    std::vector<float> again(step_output.size());
    cache.decode(0, batch, 2, queries.data(), kQueryHeads, step_output.data(), nullptr);
    loaded.decode(0, batch, 2, queries.data(), kQueryHeads, again.data(), nullptr);
    const bool same = again == step_output;
    std::printf("tokens: a %zu, b %zu; %.2f bits per value; loaded cache gives the same bits: %s\n",
                cache.tokens(a, 0), cache.tokens(b, 0),
                8.0 * double(cache.bytes()) / double(2 * kLayers * kKVHeads * kHeadDim *
                                                    (cache.tokens(a, 0) + cache.tokens(b, 0))),
                same ? "yes" : "no");
    std::remove("engine_cache.kvp");
    return same ? 0 : 1;
  } catch (const kvsketch::Error& e) {
    std::fprintf(stderr, "engine_decode: %s\n", e.what());
    return 1;
  }
}

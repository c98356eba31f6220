// PagedKVCache::load on arbitrary payloads (sealed with a matching checksum). A cache that loads
// must answer decode for every sequence with finite numbers, and go on appending and forking: a
// loader that lets a bad value or a broken invariant through is a finding.
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/paged_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = kvsketch::fuzz::sealed(data, size);
  const std::string path = kvsketch::fuzz::write_input(file.data(), file.size(), ".kvp");
  try {
    kvsketch::PagedKVCache cache = kvsketch::PagedKVCache::load(path);
    const size_t d = cache.head_dim(), q_heads = cache.kv_heads();
    const std::vector<float> queries(q_heads * d, 0.5f);
    std::vector<float> output(q_heads * d), lse(q_heads);
    kvsketch::AttentionOptions options;
    options.threads = 1;
    for (const kvsketch::SequenceId id : cache.sequences()) {
      cache.decode(0, &id, 1, queries.data(), q_heads, output.data(), lse.data(), options);
      for (const float value : output) kvsketch::fuzz::require_finite(value, "the loaded cache's attention");
      const kvsketch::SequenceId copy = cache.fork(id);
      const std::vector<float> token(cache.kv_heads() * d, 0.25f);
      cache.append(copy, 0, token.data(), token.data(), 1);
      cache.remove_sequence(copy);
    }
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

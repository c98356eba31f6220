// KVCache::load on arbitrary payloads (sealed with a matching checksum). A cache that loads must
// answer attention with finite numbers: a loader that lets a bad value through is a finding.
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/kv_cache.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = kvsketch::fuzz::sealed(data, size);
  const std::string path = kvsketch::fuzz::write_input(file.data(), file.size(), ".kvc");
  try {
    const kvsketch::KVCache cache = kvsketch::KVCache::load(path);
    if (cache.tokens(0) == 0) return 0;
    const std::vector<float> query(cache.head_dim(), 0.5f);
    kvsketch::AttentionOptions options;
    options.threads = 1;
    const kvsketch::AttentionResult r = kvsketch::decode_attention(cache, 0, 0, query.data(), 1, options);
    kvsketch::fuzz::require_finite(r.lse[0], "the loaded cache's log-sum-exp");
    for (const float value : r.output) kvsketch::fuzz::require_finite(value, "the loaded cache's attention");
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

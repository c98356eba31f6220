// IvfIndex::load and IvfIndex::map on arbitrary payloads (sealed with a matching checksum). An
// index that loads must search its lists with finite scores, and map must agree with load: both
// refuse, or both give the same answer.
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/ivf_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = kvsketch::fuzz::sealed(data, size);
  const std::string path = kvsketch::fuzz::write_input(file.data(), file.size(), ".kvivf");
  const auto answer = [&](bool map) -> std::vector<int64_t> {
    try {
      const kvsketch::IvfIndex index = map ? kvsketch::IvfIndex::map(path) : kvsketch::IvfIndex::load(path);
      if (index.size() == 0) return {-2};
      const std::vector<float> query(index.dim(), 0.5f);
      const kvsketch::Neighbors hits = index.search(query.data(), 1, 1, index.options().nlist);
      kvsketch::fuzz::require_finite(hits.score(0, 0), "the loaded index's best score");
      return hits.ids;
    } catch (const kvsketch::Error&) {
      return {-3};
    }
  };
  if (answer(false) != answer(true)) __builtin_trap();  // map disagrees with load
  return 0;
}

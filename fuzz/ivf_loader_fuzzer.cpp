// IvfIndex::load on arbitrary payloads (sealed with a matching checksum). An index that loads
// must search its lists with finite scores.
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/ivf_index.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> file = kvsketch::fuzz::sealed(data, size);
  const std::string path = kvsketch::fuzz::write_input(file.data(), file.size(), ".kvivf");
  try {
    const kvsketch::IvfIndex index = kvsketch::IvfIndex::load(path);
    if (index.size() == 0) return 0;
    const std::vector<float> query(index.dim(), 0.5f);
    const kvsketch::Neighbors hits = index.search(query.data(), 1, 1, index.options().nlist);
    kvsketch::fuzz::require_finite(hits.score(0, 0), "the loaded index's best score");
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

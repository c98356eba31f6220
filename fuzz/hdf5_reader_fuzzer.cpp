// read_hdf5 on arbitrary bytes (ann-benchmarks files): the dataset "train" of the file.
//
// libhdf5 sizes some of its own metadata buffers from the file and asks malloc for them (up to
// 2^52 bytes from a corrupt header); malloc's null is an error it reports, which read_hdf5 turns
// into a kvsketch::Error. So here malloc may return null (the allocator's limit, not an abort),
// and libFuzzer's single-allocation limit is lifted (hdf5_reader.options); a huge allocation of
// kvsketch's own still fails the run, as std::bad_alloc escaping the target, and memory actually
// used is still capped by -rss_limit_mb.
#include "fuzz_input.hpp"
#include "kvsketch/eval/datasets.hpp"

extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvsketch::fuzz::write_input(data, size, ".hdf5");
  try {
    const kvsketch::Matrix m = kvsketch::read_hdf5(path, "train");
    if (m.values.size() != m.rows * m.cols) std::abort();
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

// read_hdf5 on arbitrary bytes (ann-benchmarks files): the dataset "train" of the file.
#include "fuzz_input.hpp"
#include "kvsketch/io.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvsketch::fuzz::write_input(data, size, ".hdf5");
  try {
    const kvsketch::Matrix m = kvsketch::read_hdf5(path, "train");
    if (m.values.size() != m.rows * m.cols) std::abort();
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

// The matrix readers (io.hpp) on arbitrary bytes: the first byte picks the format, the rest is the
// file. Every read either gives rows x cols values or throws kvsketch::Error.
#include "fuzz_input.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace {

const char* const kFormats[] = {".npy", ".tsv", ".tsv:ids", ".fvecs", ".ivecs", ".bvecs", "-ubyte", ".safetensors",
                                ".safetensors:keys"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string format = kFormats[data[0] % std::size(kFormats)];
  // A tensor name or the :ids suffix is part of the name read_matrix gets, not of the file.
  const size_t colon = format.find(':');
  const std::string path = kvsketch::fuzz::write_input(data + 1, size - 1, format.substr(0, colon));
  try {
    const kvsketch::Matrix m = kvsketch::read_matrix(colon == std::string::npos ? path : path + format.substr(colon));
    if (m.values.size() != m.rows * m.cols) std::abort();
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

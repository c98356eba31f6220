// Tokenizer::parse on arbitrary tokenizer.json text; a tokenizer that parses must encode a mixed
// text and decode its ids, or throw Error.
#include <string>

#include "fuzz_input.hpp"
#include "kvsketch/model/tokenizer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const auto t = kvsketch::model::Tokenizer::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
    const auto ids = t.encode("Hello w\xc3\xb6rld 123 <s> \xe6\x9d\xb1\xe4\xba\xac ab  \n\t");
    t.decode(ids, false);
    t.decode(ids, true);
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

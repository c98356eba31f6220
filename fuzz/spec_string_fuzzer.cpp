// The spec strings: KV policies, codecs and selectors. The first byte picks the grammar (and a
// dimension), the rest is the string. What parses must print a canonical spec that parses to
// itself; a codec that builds must encode and decode a row to finite values.
#include <string>
#include <vector>

#include "fuzz_input.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/sparse_attention.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0 || size > 4096) return 0;
  const std::string text(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t dim = 2 + (data[0] >> 2);  // 2..65
  try {
    switch (data[0] % 3) {
      case 0: {
        const kvsketch::KVPolicy policy = kvsketch::KVPolicy::parse(text);
        if (kvsketch::KVPolicy::parse(policy.spec()).spec() != policy.spec()) std::abort();
        break;
      }
      case 1: {
        const auto codec = kvsketch::make_codec(text, dim, 1);
        if (kvsketch::make_codec(codec->spec(), dim, 1)->spec() != codec->spec()) std::abort();
        std::vector<float> rows(codec->row_group() * dim);
        for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(i % 7) - 3.0f;
        kvsketch::CodeBuffer codes = codec->make_buffer();
        codec->calibrate(rows.data(), codec->row_group());
        codec->encode(rows.data(), codec->row_group(), codes);
        std::vector<float> decoded(rows.size());
        codec->decode(codes, 0, codec->row_group(), decoded.data());
        for (const float value : decoded) kvsketch::fuzz::require_finite(value, "a decoded value");
        break;
      }
      default:
        kvsketch::make_selector(text, dim, 1);
    }
  } catch (const kvsketch::Error&) {
  }
  return 0;
}

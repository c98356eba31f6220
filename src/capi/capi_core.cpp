// The C ABI's version, last error and attention merge.
#include <cmath>
#include <string>

#include "capi/capi_support.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch::capi {
namespace {
thread_local std::string last_error;
}

void set_last_error(const char* message) { last_error = message; }

const float* as_floats(kvs_dtype dtype, const void* data, size_t count, std::vector<float>& storage) {
  switch (dtype) {
    case KVS_FLOAT32:
      return static_cast<const float*>(data);
    case KVS_FLOAT16: {
      const auto* halves = static_cast<const uint16_t*>(data);
      storage.resize(count);
      for (size_t i = 0; i < count; ++i) storage[i] = kvsketch::half_to_float(halves[i]);
      return storage.data();
    }
    case KVS_DTYPE_MAX_ENUM:
      break;
    case KVS_BFLOAT16: {
      const auto* bits = static_cast<const uint16_t*>(data);
      storage.resize(count);
      for (size_t i = 0; i < count; ++i) {
        const uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
        std::memcpy(&storage[i], &word, 4);
      }
      return storage.data();
    }
  }
  throw ArgumentError("dtype is " + std::to_string(static_cast<int>(dtype)) +
                      "; KVS_FLOAT32, KVS_FLOAT16 or KVS_BFLOAT16");
}

}  // namespace kvsketch::capi

using namespace kvsketch::capi;

extern "C" {

uint32_t kvs_abi_version(void) { return KVS_ABI_VERSION; }

const char* kvs_version(void) {
#define KVS_STRING(x) #x
#define KVS_VERSION_STRING(a, b, c) KVS_STRING(a) "." KVS_STRING(b) "." KVS_STRING(c)
  return KVS_VERSION_STRING(KVS_VERSION_MAJOR, KVS_VERSION_MINOR, KVS_VERSION_PATCH);
}

const char* kvs_last_error(void) { return kvsketch::capi::last_error.c_str(); }

kvs_status kvs_merge_attention(const float* output_a, const float* lse_a, const float* output_b, const float* lse_b,
                               size_t heads, size_t dim, float* output, float* lse) {
  return guarded([&] {
    require_pointer(output_a, "output_a");
    require_pointer(lse_a, "lse_a");
    require_pointer(output_b, "output_b");
    require_pointer(lse_b, "lse_b");
    require_pointer(output, "output");
    require_pointer(lse, "lse");
    require_argument(heads > 0 && dim > 0, "heads and dim must be >= 1");
    product(heads, dim, "heads x dim");
    kvsketch::merge_attention_states(output_a, lse_a, output_b, lse_b, heads, dim, output, lse);
  });
}

}  // extern "C"

// The C ABI's codecs.
#include <cstring>
#include <string>

#include "capi/capi_support.hpp"

using namespace kvsketch::capi;

namespace {

// The caller's n rows of codes as the codec's buffer (a copy: codecs read CodeBuffers).
kvsketch::CodeBuffer rows_of(const kvsketch::VectorCodec& codec, const uint8_t* codes, size_t n) {
  kvsketch::CodeBuffer buffer(codec.code_bytes());
  const size_t bytes = product(n, codec.code_bytes(), "n x code_bytes");
  buffer.data().assign(codes, codes + bytes);
  return buffer;
}

}  // namespace

extern "C" {

kvs_status kvs_codec_create(const char* spec, size_t dim, uint64_t seed, kvs_codec** codec) {
  return guarded([&] {
    require_pointer(spec, "spec");
    require_pointer(codec, "codec");
    *codec = nullptr;
    auto made = std::make_unique<kvs_codec>();
    made->codec = kvsketch::make_codec(spec, dim, seed);
    *codec = Registry<kvs_codec>::adopt(std::move(made));
  });
}

void kvs_codec_destroy(kvs_codec* codec) {
  if (codec) Registry<kvs_codec>::release(codec);
}

kvs_status kvs_codec_dim(const kvs_codec* codec, size_t* dim) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(dim, "dim");
    *dim = c.codec->dim();
  });
}

kvs_status kvs_codec_code_bytes(const kvs_codec* codec, size_t* bytes) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(bytes, "bytes");
    *bytes = c.codec->code_bytes();
  });
}

kvs_status kvs_codec_spec(const kvs_codec* codec, char* spec, size_t capacity, size_t* length) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    const std::string text = c.codec->spec();
    if (length) *length = text.size();
    require_pointer(spec, "spec");
    require_argument(capacity > text.size(), "capacity " + std::to_string(capacity) + " is too small for the spec (" +
                                                 std::to_string(text.size() + 1) + " bytes with its NUL)");
    std::memcpy(spec, text.c_str(), text.size() + 1);
  });
}

kvs_status kvs_codec_encode(const kvs_codec* codec, const float* x, size_t n, uint8_t* codes, size_t codes_size) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(x, "x");
    require_pointer(codes, "codes");
    const size_t needed = product(n, c.codec->code_bytes(), "n x code_bytes");
    require_argument(codes_size >= needed, "codes_size is " + std::to_string(codes_size) + "; " + std::to_string(n) +
                                               " rows need " + std::to_string(needed) + " bytes");
    product(n, c.codec->dim(), "n x dim");
    kvsketch::CodeBuffer buffer(c.codec->code_bytes());
    c.codec->encode(x, n, buffer);
    std::memcpy(codes, buffer.data().data(), needed);
  });
}

kvs_status kvs_codec_decode(const kvs_codec* codec, const uint8_t* codes, size_t n, float* out) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(codes, "codes");
    require_pointer(out, "out");
    product(n, c.codec->dim(), "n x dim");
    const kvsketch::CodeBuffer buffer = rows_of(*c.codec, codes, n);
    c.codec->decode(buffer, 0, n, out);
  });
}

kvs_status kvs_codec_scores(const kvs_codec* codec, const float* query, const uint8_t* codes, size_t n, float* out) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(query, "query");
    require_pointer(codes, "codes");
    require_pointer(out, "out");
    const kvsketch::CodeBuffer buffer = rows_of(*c.codec, codes, n);
    const auto prepared = c.codec->prepare(query);
    c.codec->scores(*prepared, buffer, 0, n, out);
  });
}

kvs_status kvs_codec_accumulate(const kvs_codec* codec, const float* weights, const uint8_t* codes, size_t n,
                                float* out) {
  return guarded([&] {
    const auto& c = handle(codec, "codec");
    require_pointer(weights, "weights");
    require_pointer(codes, "codes");
    require_pointer(out, "out");
    const kvsketch::CodeBuffer buffer = rows_of(*c.codec, codes, n);
    c.codec->accumulate(weights, buffer, 0, n, out);
  });
}

}  // extern "C"

// KVCache::save and KVCache::load. File layout (little-endian):
//   "KVSKETCH" "CACHE\0\0\0"   magic, 16 bytes
//   u32 version (1), u32 reserved
//   u64 layers, kv_heads, head_dim, seed; u64 policy length, policy spec bytes
//   per layer, per kv head: u64 sink_count, window_count, body_rows; then the fp16 sink keys,
//     sink values, window keys, window values, and the body's key and value codes; then (version
//     2) the key and value codecs' calibration states, each as u64 length and bytes
//   u64 payload bytes (everything above), u32 CRC-32 of it (zlib), u32 reserved
// The codecs are rebuilt from the policy and the seed, exactly as the cache made them.
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "kvsketch/error.hpp"
#include "kvsketch/kv_cache.hpp"

namespace kvsketch {
namespace {

constexpr char kMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'C', 'A', 'C', 'H', 'E', 0, 0, 0};
constexpr uint32_t kVersion = 2;  // 2 added calibration states; 1 is still read
constexpr size_t kTrailerBytes = 16;

class Writer {
 public:
  void raw(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  void u64(uint64_t v) { raw(&v, 8); }
  void u32(uint32_t v) { raw(&v, 4); }
  std::vector<uint8_t>& bytes() { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const std::vector<uint8_t>& bytes, size_t end, const std::string& path)
      : bytes_(bytes), end_(end), path_(path) {}
  const uint8_t* take(size_t n, const char* what) {
    require(n <= end_ - position_, "load: {} is truncated or corrupted: {} needs {} bytes at offset {}, {} remain",
            path_, what, n, position_, end_ - position_);
    const uint8_t* p = bytes_.data() + position_;
    position_ += n;
    return p;
  }
  uint64_t u64(const char* what) {
    uint64_t v;
    std::memcpy(&v, take(8, what), 8);
    return v;
  }
  uint32_t u32(const char* what) {
    uint32_t v;
    std::memcpy(&v, take(4, what), 4);
    return v;
  }
  size_t position() const { return position_; }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t end_, position_ = 0;
  const std::string& path_;
};

uint32_t crc32_of(const uint8_t* data, size_t n) {
  uLong crc = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes uInt lengths
    const uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = crc32(crc, data, chunk);
    data += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(crc);
}

template <typename T>
void read_into(Reader& in, std::vector<T>& out, size_t count, const char* what) {
  out.resize(count);
  if (count) std::memcpy(out.data(), in.take(count * sizeof(T), what), count * sizeof(T));
}

}  // namespace

void KVCache::save(const std::string& path) const {
  Writer out;
  out.raw(kMagic, sizeof(kMagic));
  out.u32(kVersion);
  out.u32(0);
  out.u64(layers_);
  out.u64(kv_heads_);
  out.u64(head_dim_);
  out.u64(seed_);
  const std::string policy = policy_.spec();
  out.u64(policy.size());
  out.raw(policy.data(), policy.size());
  for (const HeadCache& h : heads_) {
    out.u64(h.sink_count);
    out.u64(h.window_count);
    out.u64(h.body_count());
    for (const auto* halves : {&h.sink_keys, &h.sink_values, &h.window_keys, &h.window_values})
      out.raw(halves->data(), halves->size() * 2);
    out.raw(h.body_keys.data().data(), h.body_keys.bytes());
    out.raw(h.body_values.data().data(), h.body_values.bytes());
  }
  for (size_t i = 0; i < heads_.size(); ++i)
    for (const auto* codec : {key_codecs_[i].get(), value_codecs_[i].get()}) {
      const std::vector<uint8_t> state = codec->calibration();
      out.u64(state.size());
      out.raw(state.data(), state.size());
    }
  const uint64_t payload = out.bytes().size();
  const uint32_t crc = crc32_of(out.bytes().data(), payload);
  out.u64(payload);
  out.u32(crc);
  out.u32(0);
  // Written beside the target and renamed over it: a failed save leaves any old file intact.
  const std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    require(file.good(), "save: cannot open {} for writing", temporary);
    file.write(reinterpret_cast<const char*>(out.bytes().data()), static_cast<std::streamsize>(out.bytes().size()));
    file.flush();
    require(file.good(), "save: writing {} failed (disk full?)", temporary);
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  require(!error, "save: cannot move {} to {}: {}", temporary, path, error.message());
}

KVCache KVCache::load(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  require(file.good(), "load: cannot open {}", path);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  require(bytes.size() >= sizeof(kMagic) + kTrailerBytes, "load: {} is too short ({} bytes) to be a kvsketch cache",
          path, bytes.size());
  require(std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0, "load: {} is not a kvsketch cache file (bad magic)",
          path);
  const size_t end = bytes.size() - kTrailerBytes;
  uint64_t payload;
  uint32_t crc;
  std::memcpy(&payload, bytes.data() + end, 8);
  std::memcpy(&crc, bytes.data() + end + 8, 4);
  require(payload == end, "load: {} is truncated or has trailing bytes (payload says {} bytes, file holds {})", path,
          payload, end);
  require(crc32_of(bytes.data(), end) == crc, "load: {} is corrupted (CRC-32 mismatch)", path);

  Reader in(bytes, end, path);
  in.take(sizeof(kMagic), "magic");
  const uint32_t version = in.u32("version");
  require(version == 1 || version == kVersion, "load: {} has format version {}; this build reads versions 1..{}",
          path, version, kVersion);
  in.u32("reserved");
  const uint64_t layers = in.u64("layers"), kv_heads = in.u64("kv_heads"), head_dim = in.u64("head_dim");
  const uint64_t seed = in.u64("seed"), policy_bytes = in.u64("policy length");
  const uint8_t* policy_text = in.take(policy_bytes, "policy");
  KVCache cache(layers, kv_heads, head_dim,
                KVPolicy::parse(std::string(reinterpret_cast<const char*>(policy_text), policy_bytes)), seed);
  for (size_t i = 0; i < cache.heads_.size(); ++i) {
    HeadCache& h = cache.heads_[i];
    const uint64_t sinks = in.u64("sink count"), window = in.u64("window count"), body = in.u64("body rows");
    require(sinks <= cache.policy_.sinks && body % cache.policy_.block == 0 &&
                window < cache.policy_.window + cache.policy_.block && (body + window == 0 || sinks == cache.policy_.sinks),
            "load: {} is inconsistent: head {} holds {} sinks, {} body and {} window tokens under policy {}", path, i,
            sinks, body, window, cache.policy_.spec());
    const size_t d = cache.head_dim_;
    read_into(in, h.sink_keys, sinks * d, "sink keys");
    read_into(in, h.sink_values, sinks * d, "sink values");
    read_into(in, h.window_keys, window * d, "window keys");
    read_into(in, h.window_values, window * d, "window values");
    h.sink_count = sinks;
    h.window_count = window;
    for (CodeBuffer* codes : {&h.body_keys, &h.body_values}) {
      const size_t code_bytes = codes->code_bytes();
      require(code_bytes == 0 || body <= (end - in.position()) / code_bytes,
              "load: {} is truncated or corrupted: head {} claims {} body rows", path, i, body);
      codes->resize(body);
      if (body) std::memcpy(codes->data().data(), in.take(body * code_bytes, "body codes"), body * code_bytes);
    }
  }
  if (version >= 2)
    for (size_t i = 0; i < cache.heads_.size(); ++i)
      for (auto* codec : {cache.key_codecs_[i].get(), cache.value_codecs_[i].get()}) {
        const uint64_t length = in.u64("calibration length");
        const uint8_t* state = in.take(length, "calibration state");
        try {
          codec->set_calibration(std::vector<uint8_t>(state, state + length));
        } catch (const Error& e) {
          throw Error(fmt::format("load: {} is inconsistent: head {}: {}", path, i, e.what()));
        }
      }
  require(in.position() == end, "load: {} has {} unexpected bytes after the last head", path, end - in.position());
  // Every layer holds as many tokens in every head.
  for (size_t layer = 0; layer < layers; ++layer)
    for (size_t h = 1; h < kv_heads; ++h)
      require(cache.heads_[cache.index(layer, h)].tokens() == cache.heads_[cache.index(layer, 0)].tokens(),
              "load: {} is inconsistent: layer {} heads hold different token counts", path, layer);
  return cache;
}

}  // namespace kvsketch

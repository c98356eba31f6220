// Calibration::save and Calibration::load. File layout (little-endian):
//   "KVSKETCH" "CALIB\0\0\0"   magic, 16 bytes
//   then to_bytes():
//   u32 version (1), u32 reserved
//   u64 layers, kv_heads, head_dim, seed; u64 policy length, policy spec bytes
//   per layer, per kv head: u64 fitted (0 or 1); the key and the value codec's state, each as u64
//     length and bytes
//   u64 payload bytes (everything above), u32 CRC-32 of it (zlib), u32 reserved
#include <algorithm>

#include "cache/cache_header.hpp"
#include "io/checked_file.hpp"
#include "kvsketch/calibration.hpp"
#include "core/require.hpp"
#include "kvsketch/kv_cache.hpp"

namespace kvsketch {
namespace {

constexpr char kMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'C', 'A', 'L', 'I', 'B', 0, 0, 0};
constexpr uint32_t kVersion = 1;

}  // namespace

std::vector<uint8_t> Calibration::to_bytes() const {
  BinaryWriter out;
  out.u32(kVersion);
  out.u32(0);
  write_cache_header(out, {layers_, kv_heads_, head_dim_, seed_, policy_.spec()});
  for (size_t i = 0; i < fitted_.size(); ++i) {
    out.u64(fitted_[i]);
    out.u64(key_states_[i].size());
    out.raw(key_states_[i].data(), key_states_[i].size());
    out.u64(value_states_[i].size());
    out.raw(value_states_[i].data(), value_states_[i].size());
  }
  return std::move(out.bytes());
}

void Calibration::save(const std::string& path) const {
  BinaryWriter out;
  out.raw(kMagic, sizeof(kMagic));
  const std::vector<uint8_t> contents = to_bytes();
  out.raw(contents.data(), contents.size());
  save_checked_file(path, out);
}

Calibration Calibration::load(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kMagic, "kvsketch calibration", end);
  return from_bytes(bytes.data() + sizeof(kMagic), end - sizeof(kMagic), path);
}

Calibration Calibration::from_bytes(const uint8_t* data, size_t size, const std::string& path) {
  const std::vector<uint8_t> bytes(data, data + size);
  BinaryReader in(bytes, size, path);
  const uint32_t version = in.u32("version");
  require(version == kVersion, "load: {} has format version {}; this build reads version {}", path, version,
          kVersion);
  in.u32("reserved");
  const CacheHeader header = read_cache_header(in);
  const uint64_t layers = header.layers, kv_heads = header.kv_heads;
  // Every head stores three u64: a header claiming more heads than that is refused before any
  // codec is built.
  const uint64_t room = in.remaining() / (3 * sizeof(uint64_t));
  require(layers == 0 || kv_heads == 0 || (layers <= room && kv_heads <= room / layers),
          "load: {} is truncated or corrupted: {} layers x {} kv heads claimed, room for at most {} heads", path, layers,
          kv_heads, room);
  const auto inconsistent = [&](const Error& e) {
    return Error(fmt::format("load: {} is inconsistent: {}", path, e.what()));
  };
  const KVPolicy policy = header_policy(header, path);
  const size_t max_state = std::min(KVCache::kMaxCodecStateBytes, (size_t{256} << 20) + 64 * bytes.size());
  Calibration calibration = [&] {
    try {
      return Calibration(layers, kv_heads, header.head_dim, policy, header.seed, max_state);
    } catch (const Error& e) {
      throw inconsistent(e);
    }
  }();
  for (size_t layer = 0; layer < layers; ++layer)
    for (size_t h = 0; h < kv_heads; ++h) {
      const uint64_t fitted = in.u64("fitted flag");
      require(fitted <= 1, "load: {} is corrupted: layer {}, kv head {} has fitted flag {}", path, layer, h, fitted);
      const std::string key_state = in.text("key state"), value_state = in.text("value state");
      if (!fitted) {
        require(key_state.empty() && value_state.empty() && !calibration.fitted(layer, h),
                "load: {} is inconsistent: layer {}, kv head {} is unfitted but holds a state", path, layer, h);
        continue;
      }
      try {
        calibration.set_head(layer, h, std::vector<uint8_t>(key_state.begin(), key_state.end()),
                             std::vector<uint8_t>(value_state.begin(), value_state.end()));
      } catch (const Error& e) {
        throw Error(fmt::format("load: {} is inconsistent: layer {}, kv head {}: {}", path, layer, h, e.what()));
      }
    }
  require(in.remaining() == 0, "load: {} has {} unexpected bytes after the last head", path, in.remaining());
  return calibration;
}

}  // namespace kvsketch

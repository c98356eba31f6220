// KVCache::save and KVCache::load. File layout (little-endian):
//   "KVSKETCH" "CACHE\0\0\0"   magic, 16 bytes
//   u32 version (3), u32 reserved
//   u64 layers, kv_heads, head_dim, seed; u64 policy length, policy spec bytes
//   per layer, per kv head: u64 sink_count, window_count, body_rows; then the fp16 sink keys,
//     sink values, window keys, window values, and the body's key and value codes, as plain rows
//     whatever the policy's layout (kv_policy.hpp); then (version 2) the key and value codecs'
//     calibration states, each as u64 length and bytes
//   u64 payload bytes (everything above), u32 CRC-32 of it (zlib), u32 reserved
// The codecs are rebuilt from the policy and the seed, exactly as the cache made them.
#include <algorithm>
#include <cstring>

#include "cache/cache_header.hpp"
#include "cache/code_rows_io.hpp"
#include "io/checked_file.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/kv_cache.hpp"

namespace kvsketch {
namespace {

constexpr char kMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'C', 'A', 'C', 'H', 'E', 0, 0, 0};
// 2 added calibration states; 3 the policy's layout field, which older builds would not parse. 1
// and 2 are still read.
constexpr uint32_t kVersion = 3;

}  // namespace

void KVCache::save(const std::string& path) const {
  BinaryWriter out;
  out.raw(kMagic, sizeof(kMagic));
  out.u32(kVersion);
  out.u32(0);
  write_cache_header(out, {layers_, kv_heads_, head_dim_, seed_, policy_.spec()});
  for (size_t i = 0; i < heads_.size(); ++i) {
    const HeadCache& h = heads_[i];
    out.u64(h.sink_count);
    out.u64(h.window_count);
    out.u64(h.body_count());
    for (const auto* halves : {&h.sink_keys, &h.sink_values, &h.window_keys, &h.window_values})
      out.raw(halves->data(), halves->size() * 2);
    write_code_rows(out, *key_codecs_[i], h.body_keys);
    write_code_rows(out, *value_codecs_[i], h.body_values);
  }
  for (size_t i = 0; i < heads_.size(); ++i)
    for (const auto* codec : {key_codecs_[i].get(), value_codecs_[i].get()}) {
      const std::vector<uint8_t> state = codec->calibration();
      out.u64(state.size());
      out.raw(state.data(), state.size());
    }
  save_checked_file(path, out);
}

KVCache KVCache::load(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kMagic, "kvsketch cache", end);
  BinaryReader in(bytes, end, path);
  in.take(sizeof(kMagic), "magic");
  const uint32_t version = in.u32("version");
  require(version >= 1 && version <= kVersion, "load: {} has format version {}; this build reads versions 1..{}",
          path, version, kVersion);
  in.u32("reserved");
  const CacheHeader header = read_cache_header(in);
  const uint64_t layers = header.layers, kv_heads = header.kv_heads;
  // Every head stores at least its three counts (and, from version 2, two calibration lengths): a
  // header that claims more heads than the file could hold is refused before the cache and its
  // codecs are built (a 200 KB file claiming 4096 x 4096 heads would otherwise take tens of GB).
  const uint64_t head_bytes = (version >= 2 ? 5 : 3) * sizeof(uint64_t), room = (end - in.position()) / head_bytes;
  require(layers == 0 || kv_heads == 0 || (layers <= room && kv_heads <= room / layers),
          "load: {} is truncated or corrupted: {} layers x {} kv heads claimed, room for at most {} heads", path, layers,
          kv_heads, room);
  const KVPolicy policy = header_policy(header, path);
  // The codecs' rotations and sketches are rebuilt from the seed, not stored: a short file must not
  // claim gigabytes of them (256 MB, or more in proportion to the file).
  const size_t max_state = std::min(kMaxCodecStateBytes, (size_t{256} << 20) + 64 * bytes.size());
  KVCache cache = [&] {
    try {
      return KVCache(layers, kv_heads, header.head_dim, policy, header.seed, max_state);
    } catch (const Error& e) {
      throw Error(fmt::format("load: {} is truncated or corrupted ({} bytes): {}", path, bytes.size(), e.what()));
    }
  }();
  for (size_t i = 0; i < cache.heads_.size(); ++i) {
    HeadCache& h = cache.heads_[i];
    const uint64_t sinks = in.u64("sink count"), window = in.u64("window count"), body = in.u64("body rows");
    require(sinks <= cache.policy_.sinks && body % cache.policy_.block == 0 &&
                window < cache.policy_.window + cache.policy_.block && (body + window == 0 || sinks == cache.policy_.sinks),
            "load: {} is inconsistent: head {} holds {} sinks, {} body and {} window tokens under policy {}", path, i,
            sinks, body, window, cache.policy_.spec());
    const size_t d = cache.head_dim_;
    in.into(h.sink_keys, sinks * d, "sink keys");
    in.into(h.sink_values, sinks * d, "sink values");
    in.into(h.window_keys, window * d, "window keys");
    in.into(h.window_values, window * d, "window values");
    // append() keeps only finite values: so does a file (its checksum may hold over others).
    for (const auto* halves : {&h.sink_keys, &h.sink_values, &h.window_keys, &h.window_values})
      for (const uint16_t bits : *halves)
        require(half_is_finite(bits), "load: {} is corrupted: head {} holds a NaN or Inf fp16 value", path, i);
    h.sink_count = sinks;
    h.window_count = window;
    read_code_rows(in, *cache.key_codecs_[i], body, h.body_keys, "body key codes");
    read_code_rows(in, *cache.value_codecs_[i], body, h.body_values, "body value codes");
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
  // A checksum holds over whatever was written: rows that decode to NaN or Inf (a norm or scale
  // no encoder writes) would poison every attention over them.
  for (size_t i = 0; i < cache.heads_.size(); ++i)
    for (const bool keys : {true, false}) {
      const CodeBuffer& codes = keys ? cache.heads_[i].body_keys : cache.heads_[i].body_values;
      const size_t bad = (keys ? *cache.key_codecs_[i] : *cache.value_codecs_[i]).first_non_finite_row(codes);
      require(bad == codes.size(), "load: {} is corrupted: layer {}, kv head {}: body {} row {} decodes to NaN or Inf",
              path, i / cache.kv_heads_, i % cache.kv_heads_, keys ? "key" : "value", bad);
    }
  // Every layer holds as many tokens in every head.
  for (size_t layer = 0; layer < layers; ++layer)
    for (size_t h = 1; h < kv_heads; ++h)
      require(cache.heads_[cache.index(layer, h)].tokens() == cache.heads_[cache.index(layer, 0)].tokens(),
              "load: {} is inconsistent: layer {} heads hold different token counts", path, layer);
  return cache;
}

}  // namespace kvsketch

// PagedKVCache::save, load, save_sequence and load_sequence. Both files (little-endian):
//   "KVSKETCH" "PAGED\0\0\0" (a cache) or "KVSKETCH" "SEQUENCE" (one sequence), 16 bytes
//   u32 version (1), u32 reserved
//   u64 layers, kv_heads, head_dim, seed; u64 length and the policy spec
//   u64 length and the calibration (Calibration::to_bytes)
//   u64 pages; per page: u64 layer, u64 rows; per kv head its key rows, then its value rows, as
//     plain rows (code_rows_io.hpp)
//   u64 sequences (1 in a sequence file); per sequence: u64 id; per layer: u64 body rows, u64 page
//     count, that many u64 page numbers; per kv head: u64 sinks, retained, window; the fp16 sink keys,
//     sink values, window keys and window values (retained + window rows)
//   (cache files) u64 the next sequence id
//   u64 payload bytes (everything above), u32 CRC-32 of it (zlib), u32 reserved
#include <algorithm>
#include <map>
#include <set>

#include "cache/cache_header.hpp"
#include "cache/code_rows_io.hpp"
#include "cache/paged_cache_state.hpp"
#include "io/checked_file.hpp"
#include "core/require.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch {
namespace {

constexpr char kCacheMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'P', 'A', 'G', 'E', 'D', 0, 0, 0};
constexpr char kSequenceMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'S', 'E', 'Q', 'U', 'E', 'N', 'C', 'E'};
constexpr uint32_t kVersion = 1;

void write_halves(BinaryWriter& out, const std::vector<uint16_t>& halves) { out.raw(halves.data(), 2 * halves.size()); }

// The file's header after the magic: everything but pages and sequences.
struct Header : CacheHeader {
  std::vector<uint8_t> calibration;
};

Header read_header(BinaryReader& in) {
  const uint32_t version = in.u32("version");
  require(version == kVersion, "load: {} has format version {}; this build reads version {}", in.path(), version,
          kVersion);
  in.u32("reserved");
  Header header;
  static_cast<CacheHeader&>(header) = read_cache_header(in);
  const std::string calibration = in.text("calibration");
  header.calibration.assign(calibration.begin(), calibration.end());
  return header;
}

}  // namespace

// Writes the header, the pages of `ids` (each once) and the sequences.
void write_paged(BinaryWriter& out, const PagedKVCache& cache, const std::map<SequenceId, const Sequence*>& sequences) {
  out.u32(kVersion);
  out.u32(0);
  write_cache_header(out, {cache.layers(), cache.kv_heads(), cache.head_dim(), cache.seed(), cache.policy().spec()});
  const std::vector<uint8_t> calibration = cache.calibration().to_bytes();
  out.u64(calibration.size());
  out.raw(calibration.data(), calibration.size());
  std::map<const Page*, uint64_t> numbers;
  std::vector<std::pair<size_t, const Page*>> pages;  // (layer, page) in first-use order
  for (const auto& [id, sequence] : sequences)
    for (size_t layer = 0; layer < cache.layers(); ++layer)
      for (const auto& page : sequence->layers[layer].pages)
        if (numbers.emplace(page.get(), pages.size()).second) pages.emplace_back(layer, page.get());
  out.u64(pages.size());
  for (const auto& [layer, page] : pages) {
    out.u64(layer);
    out.u64(page->rows());
    for (size_t h = 0; h < cache.kv_heads(); ++h) {
      write_code_rows(out, cache.key_codec(layer, h), page->keys[h]);
      write_code_rows(out, cache.value_codec(layer, h), page->values[h]);
    }
  }
  out.u64(sequences.size());
  for (const auto& [id, sequence] : sequences) {
    out.u64(id);
    for (const SequenceLayer& rows : sequence->layers) {
      out.u64(rows.body);
      out.u64(rows.pages.size());
      for (const auto& page : rows.pages) out.u64(numbers.at(page.get()));
      for (const HeadRows& head : rows.heads) {
        out.u64(head.sinks);
        out.u64(head.retained);
        out.u64(head.window);
        for (const auto* halves : {&head.sink_keys, &head.sink_values, &head.window_keys, &head.window_values})
          write_halves(out, *halves);
      }
    }
  }
}

// Reads the pages and sequences of a file whose header matched `cache`, checking every invariant
// the cache keeps; returns the sequences by id.
std::map<SequenceId, Sequence> read_paged(BinaryReader& in, const PagedKVCache& cache, const KVPolicy& policy) {
  const std::string& path = in.path();
  const size_t layers = cache.layers(), kv = cache.kv_heads(), d = cache.head_dim(), page_tokens = policy.page_tokens();
  const uint64_t page_count = in.u64("page count");
  require(page_count <= in.remaining() / 16, "load: {} is truncated or corrupted: {} pages claimed", path, page_count);
  std::vector<std::pair<size_t, std::shared_ptr<Page>>> pages;
  for (uint64_t p = 0; p < page_count; ++p) {
    const uint64_t layer = in.u64("page layer"), rows = in.u64("page rows");
    require(layer < layers && rows >= 1 && rows <= page_tokens && rows % policy.block == 0,
            "load: {} is inconsistent: page {} claims layer {} and {} rows (the cache has {} layers, pages of {} "
            "tokens in blocks of {})",
            path, p, layer, rows, layers, page_tokens, policy.block);
    auto page = std::make_shared<Page>();
    page->keys.resize(kv);
    page->values.resize(kv);
    for (size_t h = 0; h < kv; ++h) {
      read_code_rows(in, cache.key_codec(layer, h), rows, page->keys[h], "page key codes");
      read_code_rows(in, cache.value_codec(layer, h), rows, page->values[h], "page value codes");
      // A checksum holds over whatever was written: rows that decode to NaN or Inf would poison
      // every attention over them.
      for (const bool keys : {true, false}) {
        const VectorCodec& codec = keys ? cache.key_codec(layer, h) : cache.value_codec(layer, h);
        const CodeBuffer& codes = keys ? page->keys[h] : page->values[h];
        const size_t bad = codec.first_non_finite_row(codes);
        require(bad == codes.size(), "load: {} is corrupted: page {}, kv head {}: {} row {} decodes to NaN or Inf", path,
                p, h, keys ? "key" : "value", bad);
      }
    }
    pages.emplace_back(layer, std::move(page));
  }
  const uint64_t count = in.u64("sequence count");
  const uint64_t least = 8 + layers * (16 + kv * 24);  // bytes of an empty sequence
  require(count <= in.remaining() / least, "load: {} is truncated or corrupted: {} sequences claimed", path, count);
  std::map<SequenceId, Sequence> sequences;
  std::set<size_t> partial_pages_used;
  for (uint64_t n = 0; n < count; ++n) {
    const SequenceId id = in.u64("sequence id");
    Sequence sequence;
    sequence.layers.resize(layers);
    for (size_t layer = 0; layer < layers; ++layer) {
      SequenceLayer& rows = sequence.layers[layer];
      rows.body = in.u64("body rows");
      const uint64_t used = in.u64("page count");
      require(used <= in.remaining() / 8, "load: {} is truncated or corrupted: sequence {} claims {} pages", path, id,
              used);
      size_t body = 0;
      for (uint64_t k = 0; k < used; ++k) {
        const uint64_t number = in.u64("page number");
        require(number < pages.size() && pages[number].first == layer,
                "load: {} is inconsistent: sequence {}, layer {} names page {}", path, id, layer, number);
        const auto& page = pages[number].second;
        // Every page full but the last; a page with room is one sequence's alone.
        require(page->rows() == page_tokens || k + 1 == used,
                "load: {} is inconsistent: sequence {}, layer {}: page {} holds {} rows before its last page", path, id,
                layer, number, page->rows());
        require(page->rows() == page_tokens || partial_pages_used.insert(number).second,
                "load: {} is inconsistent: page {} has room but is shared", path, number);
        body += page->rows();
        rows.pages.push_back(page);
      }
      require(body == rows.body, "load: {} is inconsistent: sequence {}, layer {} claims {} body rows, its pages {}",
              path, id, layer, rows.body, body);
      rows.heads.resize(kv);
      for (size_t h = 0; h < kv; ++h) {
        HeadRows& head = rows.heads[h];
        head.sinks = in.u64("sinks");
        head.retained = in.u64("retained tokens");
        head.window = in.u64("window tokens");
        const TokenSplit split = split_tokens(head.sinks + rows.body + head.window, policy.sinks, policy.window,
                                              policy.block);
        require(head.sinks <= policy.sinks && head.window <= in.remaining() && split.sinks == head.sinks &&
                    split.body == rows.body && split.window == head.window &&
                    head.retained <= std::min(rows.body, policy.rollback_tokens()) &&
                    (h == 0 || (head.sinks == rows.heads[0].sinks && head.retained == rows.heads[0].retained &&
                                head.window == rows.heads[0].window)),
                "load: {} is inconsistent: sequence {}, layer {}, kv head {} holds {} sinks, {} body, {} retained and {} "
                "window tokens under policy {}",
                path, id, layer, h, head.sinks, rows.body, head.retained, head.window, policy.spec());
        in.into(head.sink_keys, head.sinks * d, "sink keys");
        in.into(head.sink_values, head.sinks * d, "sink values");
        in.into(head.window_keys, (head.retained + head.window) * d, "window keys");
        in.into(head.window_values, (head.retained + head.window) * d, "window values");
        for (const auto* halves : {&head.sink_keys, &head.sink_values, &head.window_keys, &head.window_values})
          for (const uint16_t bits : *halves)
            require(half_is_finite(bits), "load: {} is corrupted: sequence {}, layer {} holds a NaN or Inf fp16 value",
                    path, id, layer);
      }
    }
    require(sequences.emplace(id, std::move(sequence)).second, "load: {} is inconsistent: sequence {} appears twice",
            path, id);
  }
  return sequences;
}

void PagedKVCache::save(const std::string& path) const {
  BinaryWriter out;
  out.raw(kCacheMagic, sizeof(kCacheMagic));
  std::map<SequenceId, const Sequence*> all;
  for (const auto& [id, sequence] : state_->sequences) all.emplace(id, &sequence);
  write_paged(out, *this, all);
  out.u64(state_->next_id);
  save_checked_file(path, out);
}

void PagedKVCache::save_sequence(SequenceId sequence, const std::string& path) const {
  BinaryWriter out;
  out.raw(kSequenceMagic, sizeof(kSequenceMagic));
  write_paged(out, *this, {{sequence, &state_->sequence(sequence, "save_sequence")}});
  save_checked_file(path, out);
}

PagedKVCache PagedKVCache::load(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kCacheMagic, "kvsketch paged cache", end);
  BinaryReader in(bytes, end, path);
  in.take(sizeof(kCacheMagic), "magic");
  const Header header = read_header(in);
  Calibration calibration = Calibration::from_bytes(header.calibration.data(), header.calibration.size(), path);
  require(calibration.layers() == header.layers && calibration.kv_heads() == header.kv_heads &&
              calibration.head_dim() == header.head_dim && calibration.seed() == header.seed &&
              calibration.policy().spec() == header_policy(header, path).spec(),
          "load: {} is inconsistent: its calibration is for another shape, policy or seed", path);
  PagedKVCache cache(std::move(calibration));
  std::map<SequenceId, Sequence> sequences = read_paged(in, cache, cache.policy());
  const SequenceId next = in.u64("next sequence id");
  require(in.remaining() == 0, "load: {} has {} unexpected bytes after the last sequence", path, in.remaining());
  require(sequences.empty() || sequences.rbegin()->first < next,
          "load: {} is inconsistent: sequence {} is not below the next id {}", path,
          sequences.empty() ? 0 : sequences.rbegin()->first, next);
  cache.state_->sequences = std::move(sequences);
  cache.state_->next_id = next;
  return cache;
}

SequenceId PagedKVCache::load_sequence(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kSequenceMagic, "kvsketch sequence", end);
  BinaryReader in(bytes, end, path);
  in.take(sizeof(kSequenceMagic), "magic");
  const Header header = read_header(in);
  require(header.layers == layers() && header.kv_heads == kv_heads() && header.head_dim == head_dim(),
          "load_sequence: {} holds a sequence of {} layers x {} kv heads x head_dim {}; this cache is {} x {} x {}", path,
          header.layers, header.kv_heads, header.head_dim, layers(), kv_heads(), head_dim());
  require(header_policy(header, path).spec() == policy().spec() && header.seed == seed(),
          "load_sequence: {} was written under policy '{}' and seed {}; this cache has '{}' and seed {}", path,
          header.policy, header.seed, policy().spec(), seed());
  const Calibration theirs = Calibration::from_bytes(header.calibration.data(), header.calibration.size(), path);
  std::map<SequenceId, Sequence> sequences = read_paged(in, *this, policy());
  require(in.remaining() == 0, "load_sequence: {} has {} unexpected bytes after the sequence", path, in.remaining());
  require(sequences.size() == 1, "load_sequence: {} holds {} sequences, not one", path, sequences.size());
  Sequence& sequence = sequences.begin()->second;
  // Its codes are read by this cache's codecs: the calibration must agree where it encoded.
  const Calibration& ours = calibration();
  for (size_t layer = 0; layer < layers(); ++layer) {
    if (sequence.layers[layer].body == 0) continue;
    bool same = ours.fitted(layer) && theirs.fitted(layer);
    for (size_t h = 0; same && h < kv_heads(); ++h)
      same = ours.key_state(layer, h) == theirs.key_state(layer, h) &&
             ours.value_state(layer, h) == theirs.value_state(layer, h);
    require(same, "load_sequence: {} was encoded under another calibration of layer {} than this cache's", path,
            layer);
  }
  const SequenceId id = state_->next_id++;
  state_->sequences.emplace(id, std::move(sequence));
  return id;
}

}  // namespace kvsketch

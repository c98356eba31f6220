// IvfIndex::save and IvfIndex::load. File layout (little-endian), checked_file.hpp framing:
//   "KVSKETCH" "IVFINDEX"   magic, 16 bytes
//   u32 version (3), u32 reserved
//   u64 dim, nlist, nprobe, metric, residual, iterations, max_train, seed, fast_scan, refine,
//       k_factor, norm, next id, rows, trained
//   codec spec (u64 length, bytes)
//   centroids (nlist x dim floats, when trained)
//   per list: u64 rows, with norm=log8 (when trained) its norms' scale (f32 reference, u32 steps
//     per octave), then its arrays as the list holds them, each at an offset aligned to its
//     element size so that a mapped file serves them in place: codes (fast-scan lists: the blocks of 32 rows, then each
//     row's norm bytes, one with norm=log8; other lists: rows x the codec's row layout), ids (rows x
//     i64), norms (rows x fp16, metric l2), refine copies (rows x dim fp16, or rows x dim i8 then
//     rows x f32 scales)
//   trailer: u64 payload bytes, u32 CRC-32, u32 reserved
#include <cmath>
#include <unordered_set>

#include "ann/ivf_state.hpp"
#include "ann/log_norm.hpp"
#include "ann/kmeans.hpp"
#include "core/require.hpp"
#include "io/checked_file.hpp"
#include "io/mapped_file.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/limits.hpp"

namespace kvsketch {
namespace {

constexpr char kMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'I', 'V', 'F', 'I', 'N', 'D', 'E', 'X'};
constexpr uint32_t kVersion = 3;

}  // namespace

// The file's reader and writer, with access to the index's state.
class IvfIndexFile {
 public:
  static void write(const IvfIndex::State& s, BinaryWriter& out);
  // map: the lists' arrays stay views of bytes (which outlive the index); otherwise copies.
  static IvfIndex read(const uint8_t* bytes, size_t end, const std::string& path, bool map);
};

namespace {

template <typename T, typename Allocator>
void write_array(BinaryWriter& out, const ListArray<T, Allocator>& array) {
  out.align(sizeof(T));
  out.raw(array.data(), array.size() * sizeof(T));
}

template <typename T, typename Allocator>
void read_array(BinaryReader& in, ListArray<T, Allocator>& array, size_t count, const char* what, bool map) {
  in.align(sizeof(T), what);
  if (!map) {
    in.into(array.mutate(), count, what);
    return;
  }
  require(count <= in.remaining() / sizeof(T), "load: {} is truncated or corrupted: {} claims {} items", in.path(),
          what, count);
  array.view(reinterpret_cast<const T*>(in.take(count * sizeof(T), what)), count);
}

}  // namespace

void IvfIndex::save(const std::string& path) const {
  BinaryWriter out;
  IvfIndexFile::write(*state_, out);
  save_checked_file(path, out);
}

std::vector<uint8_t> IvfIndex::to_bytes() const {
  BinaryWriter out;
  IvfIndexFile::write(*state_, out);
  append_checked_trailer(out);
  return std::move(out.bytes());
}

IvfIndex IvfIndex::load(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kMagic, "kvsketch IVF index", end);
  return IvfIndexFile::read(bytes.data(), end, path, false);
}

IvfIndex IvfIndex::map(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  const size_t end = checked_payload_end(file->data(), file->size(), kMagic, "kvsketch IVF index", path);
  IvfIndex index = IvfIndexFile::read(file->data(), end, path, true);
  index.state_->mapping = std::move(file);
  return index;
}

IvfIndex IvfIndex::from_bytes(const std::vector<uint8_t>& bytes, const std::string& what) {
  return IvfIndexFile::read(bytes.data(), checked_payload_end(bytes, kMagic, "kvsketch IVF index", what), what, false);
}

void IvfIndexFile::write(const IvfIndex::State& s, BinaryWriter& out) {
  out.raw(kMagic, sizeof(kMagic));
  out.u32(kVersion);
  out.u32(0);
  for (const uint64_t field :
       {uint64_t{s.dim}, uint64_t{s.options.nlist}, uint64_t{s.options.nprobe}, uint64_t(s.options.metric),
        uint64_t{s.options.residual}, uint64_t{s.options.iterations}, uint64_t{s.options.max_train}, s.options.seed,
        uint64_t{s.options.fast_scan}, uint64_t(s.options.refine), uint64_t{s.options.k_factor},
        uint64_t(s.options.norm), static_cast<uint64_t>(s.next_id), uint64_t{s.rows}, uint64_t{s.trained()}})
    out.u64(field);
  out.text(s.options.codec);
  out.raw(s.centroids.data(), s.centroids.size() * sizeof(float));
  const bool references = s.options.norm == ListNorm::kLog8 && s.trained();
  for (const IvfList& list : s.lists) {
    out.u64(list.rows());
    if (references) {
      out.f32(list.fast->norm_scale().reference);
      out.u32(list.fast->norm_scale().steps);
    }
    if (list.fast) {
      write_array(out, list.fast->block_bytes());
      write_array(out, list.fast->tail_bytes());
    } else {
      out.raw(list.codes.data().data(), list.codes.bytes());
    }
    write_array(out, list.ids);
    write_array(out, list.norms);
    write_array(out, list.refine.halves());
    write_array(out, list.refine.bytes());
    write_array(out, list.refine.scales());
  }
}

IvfIndex IvfIndexFile::read(const uint8_t* bytes, size_t end, const std::string& path, bool map) {
  BinaryReader in(bytes, end, path);
  in.take(sizeof(kMagic), "magic");
  const uint32_t version = in.u32("version");
  require(version == kVersion, "load: {} is IVF index format version {}; this build reads version {}", path, version,
          kVersion);
  in.u32("reserved");
  IvfIndexOptions options;
  const uint64_t dim = in.u64("dim");
  options.nlist = in.u64("nlist");
  options.nprobe = in.u64("nprobe");
  const uint64_t metric = in.u64("metric");
  require(metric <= uint64_t(Metric::kL2), "load: {} has metric {}, which is none", path, metric);
  options.metric = static_cast<Metric>(metric);
  const uint64_t residual = in.u64("residual");
  require(residual <= 1, "load: {} has residual flag {}", path, residual);
  options.residual = residual == 1;
  options.iterations = in.u64("iterations");
  options.max_train = in.u64("max_train");
  options.seed = in.u64("seed");
  const uint64_t fast_scan = in.u64("fast_scan");
  require(fast_scan <= 1, "load: {} has fast_scan flag {}", path, fast_scan);
  options.fast_scan = fast_scan == 1;
  const uint64_t refine = in.u64("refine");
  require(refine <= uint64_t(Refine::kInt8), "load: {} has refine store kind {}, which is none", path, refine);
  options.refine = static_cast<Refine>(refine);
  options.k_factor = in.u64("k_factor");
  const uint64_t norm = in.u64("norm");
  require(norm <= uint64_t(ListNorm::kLog8), "load: {} has list norm kind {}, which is none", path, norm);
  options.norm = static_cast<ListNorm>(norm);
  const uint64_t next_id = in.u64("next id");
  const uint64_t rows = in.u64("rows");
  const uint64_t trained = in.u64("trained");
  require(trained <= 1, "load: {} has trained flag {}", path, trained);
  options.codec = in.text("codec spec");
  require(dim >= 1 && dim <= kMaxDim && options.nlist >= 1 && options.nlist <= (size_t{1} << 20),
          "load: {} has dim {} and nlist {}, out of range", path, dim, options.nlist);
  require(next_id <= static_cast<uint64_t>(INT64_MAX), "load: {} has next id {}", path, next_id);
  IvfIndex index(dim, options);  // checks the options and rebuilds the codec from its spec and seed
  IvfIndex::State& s = *index.state_;
  s.next_id = static_cast<int64_t>(next_id);
  if (trained) {
    in.into(s.centroids, options.nlist * dim, "centroids");
    for (float value : s.centroids) require(std::isfinite(value), "load: {} has a centroid that is not finite", path);
    s.centroid_squares = squared_norms(s.centroids, dim);
  }
  std::unordered_set<int64_t> ids;
  for (IvfList& list : s.lists) {
    const uint64_t count = in.u64("list rows");
    require(count <= rows && (count == 0 || trained), "load: {} has a list of {} rows in an index of {}", path, count,
            rows);
    require(count <= in.remaining() / sizeof(int64_t), "load: {} is truncated or corrupted: a list claims {} rows", path,
            count);  // each row has an id: this bounds the sizes computed below
    if (trained && options.norm == ListNorm::kLog8) {
      log_norm::Scale scale;
      scale.reference = in.f32("norm scale");
      scale.steps = in.u32("norm scale");
      require(log_norm::valid(scale), "load: {} has a list norm scale (reference {}, {} steps per octave)", path,
              scale.reference, scale.steps);
      list.fast->set_norm_scale(scale);
    }
    if (list.fast) {
      FastScanStore& fast = *list.fast;
      read_array(in, fast.block_bytes(), fast.block_bytes_for(count), "fast-scan blocks", map);
      read_array(in, fast.tail_bytes(), count * fast.tail_bytes_per_row(), "fast-scan norms", map);
      fast.set_rows(count);
      const size_t bad = fast.first_non_finite_row();
      require(bad == count, "load: {} has codes that decode to NaN or Inf (row {} of a list)", path, bad);
    } else {
      const size_t code_bytes = list.codes.code_bytes();
      require(count <= in.remaining() / code_bytes, "load: {} is truncated or corrupted: a list claims {} rows", path,
              count);
      const uint8_t* codes = in.take(count * code_bytes, "codes");
      list.codes.data().assign(codes, codes + count * code_bytes);
      const size_t bad = s.codec->first_non_finite_row(list.codes);
      require(bad == count, "load: {} has codes that decode to NaN or Inf (row {} of a list)", path, bad);
    }
    read_array(in, list.ids, count, "ids", map);
    for (int64_t id : list.ids)
      require(id >= 0 && (id < s.next_id || id == INT64_MAX) && id <= s.next_id && ids.insert(id).second,
              "load: {} has id {}: negative, repeated or beyond the next id", path, id);
    const size_t l2_norms = options.metric == Metric::kL2 ? count : 0;
    read_array(in, list.norms, l2_norms, "norms", map);
    for (uint16_t norm : list.norms) require(half_is_finite(norm), "load: {} has a norm that is not finite", path);
    RefineStore& refine = list.refine;
    const bool fp16 = options.refine == Refine::kFp16, int8 = options.refine == Refine::kInt8;
    read_array(in, refine.halves(), fp16 ? count * dim : 0, "refine copies", map);
    read_array(in, refine.bytes(), int8 ? count * dim : 0, "refine copies", map);
    read_array(in, refine.scales(), int8 ? count : 0, "refine scales", map);
    refine.set_rows(count);
    require(refine.first_non_finite_row() == count, "load: {} has a refine copy that is not finite", path);
    s.rows += count;
  }
  require(s.rows == rows, "load: {} claims {} rows but its lists hold {}", path, rows, s.rows);
  require(in.remaining() == 0, "load: {} has {} bytes after its lists", path, in.remaining());
  return index;
}

}  // namespace kvsketch

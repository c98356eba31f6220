// FlatIndex::save and FlatIndex::load. File layout (little-endian), checked_file.hpp framing:
//   "KVSKETCH" "INDEX\0\0\0"   magic, 16 bytes
//   u32 version (1), u32 reserved
//   u64 dim, seed, metric, rerank store, rerank candidates, fast scan, rows; codec spec (u64 length, bytes)
//   u64 calibrated flag, codec calibration state (u64 length, bytes), u64 centre flag, centre
//   (u64 count, floats)
//   codes: rows x code_bytes, or (fast scan) ceil(rows / 32) blocks of groups x 16 bytes, then
//     rows x the codec's trailing bytes (norm or scale), ids (rows x i64), L2 norms (rows x fp16, metric l2 only),
//   stored copies (rows x dim fp16 or fp32, when kept)
//   trailer: u64 payload bytes, u32 CRC-32, u32 reserved
// The codec is rebuilt from its spec and the seed, exactly as the index made it.
#include <cmath>

#include "ann/fast_scan_store.hpp"
#include "io/checked_file.hpp"
#include "kvsketch/ann.hpp"
#include "kvsketch/half.hpp"

namespace kvsketch {
namespace {

constexpr char kMagic[16] = {'K', 'V', 'S', 'K', 'E', 'T', 'C', 'H', 'I', 'N', 'D', 'E', 'X', 0, 0, 0};
constexpr uint32_t kVersion = 1;

}  // namespace

void FlatIndex::save(const std::string& path) const {
  BinaryWriter out;
  out.raw(kMagic, sizeof(kMagic));
  out.u32(kVersion);
  out.u32(0);
  for (const uint64_t field : {uint64_t{dim_}, options_.seed, uint64_t(options_.metric), uint64_t(options_.rerank_store),
                               uint64_t{options_.rerank_candidates}, uint64_t{options_.fast_scan}, uint64_t{size()}})
    out.u64(field);
  out.text(options_.codec);
  const std::vector<uint8_t> calibration = codec_->calibration();
  out.u64(calibrated_);
  out.u64(calibration.size());
  out.raw(calibration.data(), calibration.size());
  out.u64(options_.center);
  out.u64(center_.size());
  out.raw(center_.data(), center_.size() * 4);
  if (fast_) {
    out.raw(fast_->block_bytes().data(), fast_->block_bytes().size());
    out.raw(fast_->tail_bytes().data(), fast_->tail_bytes().size());
  } else {
    out.raw(codes_.data().data(), codes_.bytes());
  }
  out.raw(ids_.data(), ids_.size() * sizeof(int64_t));
  out.raw(norms_.data(), norms_.size() * 2);
  out.raw(copy16_.data(), copy16_.size() * 2);
  out.raw(copy32_.data(), copy32_.size() * 4);
  save_checked_file(path, out);
}

FlatIndex FlatIndex::load(const std::string& path) {
  size_t end = 0;
  const std::vector<uint8_t> bytes = load_checked_file(path, kMagic, "kvsketch index", end);
  BinaryReader in(bytes, end, path);
  in.take(sizeof(kMagic), "magic");
  const uint32_t version = in.u32("version");
  require(version == kVersion, "load: {} has index format version {}; this build reads version {}", path, version,
          kVersion);
  in.u32("reserved");
  FlatIndexOptions options;
  const uint64_t dim = in.u64("dim");
  options.seed = in.u64("seed");
  const uint64_t metric = in.u64("metric"), store = in.u64("rerank store");
  require(metric <= uint64_t(Metric::kL2) && store <= uint64_t(RerankStore::kFp32),
          "load: {} is inconsistent: metric {} or rerank store {} unknown", path, metric, store);
  options.metric = Metric(metric);
  options.rerank_store = RerankStore(store);
  options.rerank_candidates = in.u64("rerank candidates");
  options.fast_scan = in.u64("fast scan flag") != 0;
  const uint64_t rows = in.u64("rows");
  options.codec = in.text("codec spec");
  FlatIndex index = [&] {
    try {
      return FlatIndex(dim, options);
    } catch (const Error& e) {
      throw Error(fmt::format("load: {} is inconsistent: {}", path, e.what()));
    }
  }();
  index.calibrated_ = in.u64("calibrated flag") != 0;
  const uint64_t calibration_length = in.u64("calibration length");
  const uint8_t* calibration = in.take(calibration_length, "calibration state");
  try {
    index.codec_->set_calibration(std::vector<uint8_t>(calibration, calibration + calibration_length));
  } catch (const Error& e) {
    throw Error(fmt::format("load: {} is inconsistent: {}", path, e.what()));
  }
  index.choose_layout();  // empty still: follows the codec's restored calibration
  require(index.fast_scan() == options.fast_scan, "load: {} is inconsistent: fast scan flag for codec {}", path,
          options.codec);
  index.options_.center = in.u64("centre flag") != 0;
  in.into(index.center_, in.u64("centre length"), "centre");
  require(index.center_.empty() || index.center_.size() == dim,
          "load: {} is inconsistent: a centre of {} values at dimension {}", path, index.center_.size(), dim);
  // The mean of rows add() accepted: finite, and so is its squared norm.
  const auto stored_rows = [&](const std::vector<float>& values, const char* what) {
    try {
      if (!values.empty()) require_finite_rows(values.data(), values.size() / dim, dim, what);
    } catch (const Error& e) {
      throw Error(fmt::format("load: {} is corrupted: {}", path, e.what()));
    }
  };
  stored_rows(index.center_, "the centre");
  const size_t code_bytes = index.code_bytes_per_vector();
  require(rows <= in.remaining() / std::max<size_t>(code_bytes, 1), "load: {} is truncated: {} rows claimed", path,
          rows);
  if (index.fast_) {
    const size_t blocks = (rows + simd::kFastScanBlockRows - 1) / simd::kFastScanBlockRows;
    in.into(index.fast_->block_bytes().mutate(), blocks * index.fast_->groups() * 16, "fast-scan blocks");
    in.into(index.fast_->tail_bytes().mutate(), rows * index.fast_->tail_bytes_per_row(), "fast-scan norms");
    index.fast_->set_rows(rows);
  } else {
    index.codes_.resize(rows);
    if (rows) std::memcpy(index.codes_.data().data(), in.take(rows * code_bytes, "codes"), rows * code_bytes);
  }
  in.into(index.ids_, rows, "ids");
  if (options.metric == Metric::kL2) in.into(index.norms_, rows, "L2 norms");
  if (options.rerank_store == RerankStore::kFp16) in.into(index.copy16_, rows * dim, "fp16 copies");
  if (options.rerank_store == RerankStore::kFp32) in.into(index.copy32_, rows * dim, "fp32 copies");
  require(in.remaining() == 0, "load: {} has {} unexpected bytes after the stored vectors", path, in.remaining());
  // add() stores only finite norms and copies: so does a file (its checksum may hold over others).
  for (const auto* halves : {&index.norms_, &index.copy16_})
    for (const uint16_t bits : *halves)
      require(half_is_finite(bits), "load: {} is corrupted: a stored norm or copy is NaN or Inf", path);
  stored_rows(index.copy32_, "the fp32 copies");
  const size_t bad_row = index.fast_ ? index.fast_->first_non_finite_row() : index.codec_->first_non_finite_row(index.codes_);
  require(bad_row == rows, "load: {} is corrupted: row {} (id {}) decodes to NaN or Inf (a norm or scale no encoder writes)",
          path, bad_row, bad_row < rows ? index.ids_[bad_row] : -1);
  for (size_t i = 0; i < rows; ++i) {
    require(index.ids_[i] >= 0 && index.position_.emplace(index.ids_[i], i).second,
            "load: {} is inconsistent: row {} has id {}, negative or repeated", path, i, index.ids_[i]);
    index.next_id_ = std::max(index.next_id_, index.ids_[i] == INT64_MAX ? INT64_MAX : index.ids_[i] + 1);
  }
  return index;
}

}  // namespace kvsketch

// DeviceLayerCodecs: the checks of what the kernels support, and the codecs' rotations and
// codebooks copied to the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include <cmath>

#include "codec/centered_codec.hpp"
#include "codec/channel_split.hpp"
#include "codec/qjl.hpp"
#include "codec/quad_rows_codec.hpp"
#include "codec/turboquant.hpp"
#include "core/require.hpp"
#include "cuda/device_memory.hpp"
#include "cuda/device_tables.hpp"
#include "kvsketch/cuda.hpp"
#include "kvsketch/half.hpp"
#include "kvsketch/paged_cache.hpp"
#include "kvsketch/transform.hpp"

namespace kvsketch::cuda {

namespace detail {

namespace {

// A table of 2^bits values (centroids), with the byte tables of the look-ups: all of them for
// b <= 3, the upper half's magnitudes for b = 4 (the kernel takes the sign from the top bit).
CodebookView table_view(const float* centroids, const float* boundaries, int bits) {
  CodebookView view;
  view.bits = bits;
  const size_t count = size_t{1} << bits;
  std::copy_n(centroids, count, view.centroids);
  std::copy_n(boundaries, count - 1, view.boundaries);
  const size_t first = bits == 4 ? 8 : 0;
  if (bits == 4)
    for (size_t k = 0; k < 8; ++k)
      require(centroids[15 - k] == -centroids[k],
              "cuda: the 4-bit codebook is not symmetric (centroid {} is {}, centroid {} is {})", k, centroids[k],
              15 - k, centroids[15 - k]);
  uint8_t low[8] = {}, high[8] = {};
  for (size_t k = 0; k < std::min<size_t>(8, count); ++k) {
    const uint16_t half = float_to_half(centroids[first + k]);
    low[k] = static_cast<uint8_t>(half);
    high[k] = static_cast<uint8_t>(half >> 8);
  }
  std::memcpy(view.low_bytes, low, 8);
  std::memcpy(view.high_bytes, high, 8);
  return view;
}

}  // namespace

CodebookView codebook_view(const Codebook& codebook, int bits) {
  return table_view(codebook.centroids.data(), codebook.boundaries.data(), bits);
}

CodebookView sign_table_view() {
  const float signs[2] = {-1.0f, 1.0f}, boundary[1] = {0.0f};
  return table_view(signs, boundary, 1);
}

void bind_keys(const PartView& keys, BodyView& body) {
  body.key_bits = keys.layout();
  body.key_signs = keys.signs;
  body.key_codebook = keys.parts[0].codebook;
  body.key_rotation = keys.parts[0].rotation;
  body.key_codebook1 = keys.parts[1].codebook;
  body.key_rotation1 = keys.parts[1].rotation;
  body.key_channels = keys.channels;
  body.key_mean = keys.mean;
  if (!keys.signs) return;
  body.sign_table = sign_table_view();
  body.key_sketch = keys.sketch;
  body.key_sketch_matrix = keys.sketch_matrix;
  // A Hadamard sketch's rows are sqrt(dim) times its block's transform; a dense one is S itself.
  const float rows_scale = keys.sketch_matrix ? 1.0f : static_cast<float>(std::sqrt(static_cast<double>(keys.dim)));
  body.sketch_scale = rows_scale * keys.sign_scale;
}

void bind_values(const PartView& values, BodyView& body) {
  body.value_bits = values.layout();
  body.value_codebook = values.parts[0].codebook;
  body.value_rotation = values.parts[0].rotation;
  body.value_codebook1 = values.parts[1].codebook;
  body.value_rotation1 = values.parts[1].rotation;
  body.value_channels = values.channels;
  body.value_mean = values.mean;
}

}  // namespace detail

namespace {

void check_head_dim(size_t dim) {
  require(dim == 64 || dim == 128 || dim == 256, "cuda: head_dim {} is not supported; the GPU kernels take 64, 128 or 256",
          dim);
}

const VectorCodec& unwrapped(const VectorCodec& codec) {
  if (const auto* quads = dynamic_cast<const QuadRowsCodec*>(&codec)) return quads->inner();
  return codec;
}

// The options of a TurboQuant (a head's codec, or a part of its split) that the kernels take; keys:
// whether tq_prod is taken (its signs are scored, never summed as values).
void check_turboquant(const TurboQuant& tq, const VectorCodec& codec, const char* role, size_t head, bool keys) {
  const TurboQuantOptions& options = tq.options();
  require(keys || !options.residual_signs,
          "cuda: the {} codec of KV head {} is {}; the GPU kernels take tq_mse values (tq_prod is for keys)", role,
          head, codec.spec());
  require(!options.residual_signs || options.sketch == SketchKind::kHadamard,
          "cuda: the {} codec of KV head {} is {}; the GPU kernels take tq_prod with sketch=hadamard", role, head,
          codec.spec());
  require(options.rotation == RotationKind::kHadamard,
          "cuda: the {} codec of KV head {} is {}; the GPU kernels take rotation=hadamard", role, head, codec.spec());
  require(options.norm == NormPrecision::kFp16, "cuda: the {} codec of KV head {} is {}; the GPU kernels take norm=fp16",
          role, head, codec.spec());
  require(options.bits >= 2 && options.bits <= 4, "cuda: the {} codec of KV head {} is {}; the GPU kernels take b = 2, 3 or 4",
          role, head, codec.spec());
}

const TurboQuant& supported_codec(const VectorCodec& codec, const char* role, size_t head, bool keys) {
  const auto* tq = dynamic_cast<const TurboQuant*>(&unwrapped(codec));
  require(tq != nullptr, "cuda: the {} codec of KV head {} is {}; the GPU kernels take {}", role, head, codec.spec(),
          keys ? "tq_mse, tq_prod, qjl or tq_mse:b=2.5/3.5 keys, or center: of them"
               : "tq_mse or tq_mse:b=2.5/3.5 values, or center: of them (tq_prod and qjl are for keys)");
  check_turboquant(*tq, codec, role, head, keys);
  check_head_dim(codec.dim());
  return *tq;
}

const Qjl* qjl_of(const VectorCodec& codec) { return dynamic_cast<const Qjl*>(&unwrapped(codec)); }
const CenteredCodec* centered_of(const VectorCodec& codec) {
  return dynamic_cast<const CenteredCodec*>(&unwrapped(codec));
}
const ChannelSplit* split_of(const VectorCodec& codec) { return dynamic_cast<const ChannelSplit*>(&unwrapped(codec)); }

// The channel splits of the shorthand tq_mse:b=2.5 and 3.5: a quarter of the channels at b + 1/2
// bits, the rest at b - 1/2, tq_mse parts; head_dim 128 or 256 (parts of a multiple of 32 channels).
const ChannelSplit& supported_split(const VectorCodec& codec, const char* role, size_t head) {
  const ChannelSplit* split = split_of(codec);
  require(split != nullptr, "cuda: the {} codecs differ between KV heads: head {} is {}", role, head, codec.spec());
  const size_t dim = codec.dim();
  require(dim == 128 || dim == 256,
          "cuda: the {} codec of KV head {} is {}; the GPU kernels take channel splits at head_dim 128 and 256", role,
          head, codec.spec());
  const bool shape = split->part_count() == 2 && split->part(0).dim() * 4 == dim &&
                     !split->part(0).options().residual_signs && !split->part(1).options().residual_signs &&
                     split->part(0).options().bits == split->part(1).options().bits + 1 &&
                     (split->part(1).options().bits == 2 || split->part(1).options().bits == 3) &&
                     split->part(0).options().rescale == split->part(1).options().rescale;
  require(shape,
          "cuda: the {} codec of KV head {} is {}; the GPU kernels take the splits of tq_mse:b=2.5 and b=3.5 (a quarter "
          "of the channels at one bit more)",
          role, head, codec.spec());
  for (size_t p = 0; p < 2; ++p) check_turboquant(split->part(p), codec, role, head, false);
  return *split;
}

const Qjl& supported_qjl(const VectorCodec& codec, size_t head) {
  const Qjl* qjl = qjl_of(codec);
  require(qjl != nullptr, "cuda: the key codecs differ between KV heads: head {} is {}", head, codec.spec());
  const QjlOptions& options = qjl->options();
  require(options.outliers == 0, "cuda: the key codec of KV head {} is {}; the GPU kernels take qjl without outliers",
          head, codec.spec());
  require(options.rows == codec.dim(), "cuda: the key codec of KV head {} is {}; the GPU kernels take qjl with m = head_dim",
          head, codec.spec());
  require(options.norm == NormPrecision::kFp16, "cuda: the key codec of KV head {} is {}; the GPU kernels take norm=fp16",
          head, codec.spec());
  check_head_dim(codec.dim());
  return *qjl;
}

// Every head's Hadamard plan, appended to `host` (floats) for one copy to the device; the view's
// pointers are offsets into it until resolved.
struct PendingRotation {
  detail::RotationView view;
  size_t factors_at = 0, flips_at = 0;
  bool has_flips = false;

  void resolve(const float* device) {
    view.factors = device + factors_at;
    view.flips = has_flips ? device + flips_at : nullptr;
  }
};

PendingRotation plan_rotation(const std::vector<RandomizedHadamard::Plan>& plans, size_t dim, std::vector<float>& host) {
  PendingRotation pending;
  const RandomizedHadamard::Plan& shape = plans.front();
  require(shape.offsets.size() <= detail::kMaxRotationSteps, "cuda: a rotation of {} steps; the kernels take at most {}",
          shape.offsets.size(), detail::kMaxRotationSteps);
  detail::RotationView& rotation = pending.view;
  rotation.dim = static_cast<int>(dim);
  rotation.window = static_cast<int>(shape.window);
  rotation.steps = static_cast<int>(shape.offsets.size());
  for (size_t s = 0; s < shape.offsets.size(); ++s) rotation.offsets[s] = static_cast<int>(shape.offsets[s]);
  pending.factors_at = host.size();
  for (const auto& plan : plans) host.insert(host.end(), plan.factors.begin(), plan.factors.end());
  for (const auto& plan : plans)
    for (float flip : plan.final_flips) pending.has_flips = pending.has_flips || flip != 1.0f;
  pending.flips_at = host.size();
  if (pending.has_flips)
    for (const auto& plan : plans) host.insert(host.end(), plan.final_flips.begin(), plan.final_flips.end());
  return pending;
}

struct PendingPart {
  detail::PartView view;
  PendingRotation rotations[detail::kMaxParts], sketch;
  bool dense_sketch = false, centred = false;
  size_t matrix_at = 0, channels_at = 0, mean_at = 0;

  void resolve(const float* device, const uint16_t* device_channels) {
    if (centred) view.mean = device + mean_at;
    for (int p = 0; p < view.part_count; ++p) {
      rotations[p].resolve(device);
      view.parts[p].rotation = rotations[p].view;
    }
    if (view.part_count > 1) view.channels = device_channels + channels_at;
    if (!view.signs) return;
    sketch.resolve(device);
    view.sketch = sketch.view;
    if (dense_sketch) view.sketch_matrix = device + matrix_at;
  }
};

// One part's scalar quantizer over the heads' TurboQuants (their rotations planned into `host`).
detail::ScalarPart scalar_part(const std::vector<const TurboQuant*>& heads, PendingRotation& rotation,
                               std::vector<float>& host) {
  const TurboQuant& first = *heads.front();
  const ScalarCodeStage& scalar = first.scalar_stage();
  detail::ScalarPart part;
  part.codebook = detail::codebook_view(scalar.codebook(), scalar.bits());
  part.rescale = first.options().rescale;
  part.packed_bytes = static_cast<int>(scalar.bytes());
  std::vector<RandomizedHadamard::Plan> plans;
  for (const TurboQuant* tq : heads) plans.push_back(dynamic_cast<const RandomizedHadamard&>(tq->rotation()).plan());
  rotation = plan_rotation(plans, first.dim(), host);
  return part;
}

// A split's two parts, their rotations per head and every head's channels (part 0's, then 1's).
PendingPart plan_split_part(const std::vector<const VectorCodec*>& codecs, const char* role, detail::HostTables& host) {
  PendingPart pending;
  const ChannelSplit& first = supported_split(*codecs.front(), role, 0);
  std::vector<const TurboQuant*> parts[2];
  pending.channels_at = host.channels.size();
  for (size_t h = 0; h < codecs.size(); ++h) {
    const ChannelSplit& split = supported_split(*codecs[h], role, h);
    const TurboQuantOptions &mine = split.part(0).options(), &theirs = first.part(0).options();
    require(split.dim() == first.dim() && mine.bits == theirs.bits && mine.rounds == theirs.rounds &&
                mine.rescale == theirs.rescale,
            "cuda: the {} codecs differ between KV heads 0 ({}) and {} ({}); a layer's heads share one spec up to the seed",
            role, codecs.front()->spec(), h, codecs[h]->spec());
    for (size_t p = 0; p < 2; ++p) {
      parts[p].push_back(&split.part(p));
      for (uint32_t channel : split.part_channels()[p]) host.channels.push_back(static_cast<uint16_t>(channel));
    }
  }
  pending.view.dim = static_cast<int>(first.dim());
  pending.view.part_count = 2;
  for (int p = 0; p < 2; ++p) {
    pending.view.parts[p] = scalar_part(parts[p], pending.rotations[p], host.floats);
    pending.view.packed_bytes += pending.view.parts[p].packed_bytes;
  }
  return pending;
}

// QJL keys: signs of S k (m = dim) and the norm; S a Hadamard block or a dense matrix per head.
PendingPart plan_qjl_part(const std::vector<const VectorCodec*>& codecs, std::vector<float>& host) {
  PendingPart pending;
  const Qjl& first = supported_qjl(*codecs.front(), 0);
  const QjlOptions& options = first.options();
  const size_t dim = first.dim();
  pending.view.dim = static_cast<int>(dim);
  pending.view.signs = true;
  pending.view.packed_bytes = static_cast<int>(dim / 8);
  pending.view.sign_scale = first.inlier_scale();
  pending.rotations[0].view.dim = static_cast<int>(dim);  // no rotation: 0 steps
  pending.dense_sketch = options.sketch != SketchKind::kHadamard;
  std::vector<RandomizedHadamard::Plan> sketches;
  std::vector<const Sketch*> matrices;
  for (size_t h = 0; h < codecs.size(); ++h) {
    const Qjl& codec = supported_qjl(*codecs[h], h);
    require(codec.dim() == dim && codec.options().sketch == options.sketch && codec.options().rounds == options.rounds,
            "cuda: the key codecs differ between KV heads 0 ({}) and {} ({}); a layer's heads share one spec up to the seed",
            codecs.front()->spec(), h, codecs[h]->spec());
    if (pending.dense_sketch)
      matrices.push_back(&codec.inlier_sketch());
    else
      sketches.push_back(codec.inlier_sketch().hadamard_block(0)->plan());
  }
  if (!pending.dense_sketch) {
    pending.sketch = plan_rotation(sketches, dim, host);
    return pending;
  }
  pending.sketch.view.dim = static_cast<int>(dim);
  pending.matrix_at = host.size();
  for (const Sketch* sketch : matrices) host.insert(host.end(), sketch->matrix().begin(), sketch->matrix().end());
  return pending;
}

PendingPart plan_part(const std::vector<const VectorCodec*>& codecs, const char* role, bool keys, detail::HostTables& host);

// center: the inner codecs' part, and every head's mean after the tables.
PendingPart plan_centred_part(const std::vector<const VectorCodec*>& codecs, const char* role, bool keys,
                              detail::HostTables& host) {
  std::vector<const VectorCodec*> inner;
  for (size_t h = 0; h < codecs.size(); ++h) {
    const CenteredCodec* centred = centered_of(*codecs[h]);
    require(centred != nullptr, "cuda: the {} codecs differ between KV heads: head {} is {}", role, h, codecs[h]->spec());
    require(!centered_of(centred->inner()), "cuda: the {} codec of KV head {} is {}; the GPU kernels centre once", role,
            h, codecs[h]->spec());
    inner.push_back(&centred->inner());
  }
  PendingPart pending = plan_part(inner, role, keys, host);
  pending.centred = true;
  pending.mean_at = host.floats.size();
  for (const VectorCodec* codec : codecs) {
    const std::vector<float>& mean = centered_of(*codec)->mean();
    host.floats.insert(host.floats.end(), mean.begin(), mean.end());
  }
  return pending;
}

PendingPart plan_part(const std::vector<const VectorCodec*>& codecs, const char* role, bool keys, detail::HostTables& host) {
  if (centered_of(*codecs.front())) return plan_centred_part(codecs, role, keys, host);
  if (keys && qjl_of(*codecs.front())) return plan_qjl_part(codecs, host.floats);
  if (split_of(*codecs.front())) return plan_split_part(codecs, role, host);
  PendingPart pending;
  const TurboQuant& first = supported_codec(*codecs.front(), role, 0, keys);
  const TurboQuantOptions& options = first.options();
  std::vector<const TurboQuant*> heads;
  std::vector<RandomizedHadamard::Plan> sketches;
  for (size_t h = 0; h < codecs.size(); ++h) {
    const TurboQuant& codec = supported_codec(*codecs[h], role, h, keys);
    require(codec.dim() == first.dim() && codec.options().bits == options.bits &&
                codec.options().rescale == options.rescale && codec.options().rounds == options.rounds &&
                codec.options().residual_signs == options.residual_signs,
            "cuda: the {} codecs differ between KV heads 0 ({}) and {} ({}); a layer's heads share one spec up to the seed",
            role, codecs.front()->spec(), h, codecs[h]->spec());
    heads.push_back(&codec);
    if (options.residual_signs) sketches.push_back(codec.sketch()->hadamard_block(0)->plan());
  }
  pending.view.dim = static_cast<int>(first.dim());
  pending.view.parts[0] = scalar_part(heads, pending.rotations[0], host.floats);
  pending.view.signs = options.residual_signs;
  pending.view.packed_bytes = pending.view.parts[0].packed_bytes + (options.residual_signs ? pending.view.dim / 8 : 0);
  pending.view.sign_scale = first.sign_scale();
  if (options.residual_signs) pending.sketch = plan_rotation(sketches, first.dim(), host.floats);
  return pending;
}

}  // namespace

namespace detail {

PartView part_view_on_host(const std::vector<const VectorCodec*>& codecs, HostTables& storage) {
  storage.floats.clear();
  storage.channels.clear();
  PendingPart pending = plan_part(codecs, "host", true, storage);
  pending.resolve(storage.floats.data(), storage.channels.data());
  return pending.view;
}

}  // namespace detail

namespace {

std::vector<const VectorCodec*> layer_codecs(const PagedKVCache& cache, size_t layer, Part part) {
  require(layer < cache.layers(), "cuda: layer {} of a cache of {} layers", layer, cache.layers());
  std::vector<const VectorCodec*> codecs;
  for (size_t h = 0; h < cache.kv_heads(); ++h)
    codecs.push_back(part == Part::kKeys ? &cache.key_codec(layer, h) : &cache.value_codec(layer, h));
  return codecs;
}

}  // namespace

DeviceLayerCodecs::DeviceLayerCodecs(const std::vector<const VectorCodec*>& keys,
                                     const std::vector<const VectorCodec*>& values) {
  require(!keys.empty() && keys.size() == values.size(), "cuda: {} key codecs and {} value codecs; one pair per KV head",
          keys.size(), values.size());
  for (size_t h = 0; h < keys.size(); ++h)
    require(keys[h] != nullptr && values[h] != nullptr, "cuda: the codecs of KV head {} are null", h);
  detail::HostTables host;
  PendingPart key_part = plan_part(keys, "key", true, host), value_part = plan_part(values, "value", false, host);
  require(keys.front()->dim() == values.front()->dim(), "cuda: keys of dim {} but values of dim {}",
          keys.front()->dim(), values.front()->dim());
  tables_ = std::make_unique<Tables>();
  tables_->kv_heads = keys.size();
  tables_->dim = keys.front()->dim();
  tables_->memory = DeviceBuffer(host.floats.size() * sizeof(float));
  copy_to_device(tables_->memory.get(), host.floats.data(), host.floats.size() * sizeof(float));
  tables_->channels = DeviceBuffer(std::max<size_t>(1, host.channels.size()) * sizeof(uint16_t));
  if (!host.channels.empty())
    copy_to_device(tables_->channels.get(), host.channels.data(), host.channels.size() * sizeof(uint16_t));
  const auto* floats = static_cast<const float*>(tables_->memory.get());
  const auto* channels = static_cast<const uint16_t*>(tables_->channels.get());
  key_part.resolve(floats, channels);
  value_part.resolve(floats, channels);
  tables_->keys = key_part.view;
  tables_->values = value_part.view;
  tables_->failure = DeviceBuffer(sizeof(unsigned long long));
}

DeviceLayerCodecs::DeviceLayerCodecs(const PagedKVCache& cache, size_t layer)
    : DeviceLayerCodecs(layer_codecs(cache, layer, Part::kKeys), layer_codecs(cache, layer, Part::kValues)) {}

DeviceLayerCodecs::~DeviceLayerCodecs() = default;
DeviceLayerCodecs::DeviceLayerCodecs(DeviceLayerCodecs&&) noexcept = default;
DeviceLayerCodecs& DeviceLayerCodecs::operator=(DeviceLayerCodecs&&) noexcept = default;

size_t DeviceLayerCodecs::kv_heads() const { return tables_->kv_heads; }
size_t DeviceLayerCodecs::head_dim() const { return tables_->dim; }
double DeviceLayerCodecs::bits(Part part) const {
  const detail::PartView& view = tables_->part(part);
  if (view.part_count > 1) return view.parts[1].codebook.bits + 0.5;
  return view.parts[0].codebook.bits + (view.signs ? 1 : 0);
}
bool DeviceLayerCodecs::residual_signs() const { return tables_->keys.gammas(); }
size_t DeviceLayerCodecs::norms_per_token(Part part) const { return static_cast<size_t>(tables_->part(part).part_count); }
size_t DeviceLayerCodecs::packed_bytes(Part part) const { return static_cast<size_t>(tables_->part(part).packed_bytes); }
size_t DeviceLayerCodecs::code_bytes(Part part) const { return packed_bytes(part) + 2 * tables_->part(part).factors(); }

namespace {

// Where encode and store_rows write a part's rows in a page store.
detail::EncodeTarget page_target(const DeviceLayerCodecs::Tables& tables, Part part, const DevicePages& pages,
                                 const int64_t* slots) {
  const bool keys = part == Part::kKeys;
  detail::EncodeTarget target;
  target.slots = slots;
  target.indices = keys ? pages.key_indices : pages.value_indices;
  target.norms = keys ? pages.key_norms : pages.value_norms;
  target.gammas = keys && tables.keys.gammas() ? pages.key_gammas : nullptr;
  target.norms_per_token = tables.part(part).part_count;
  target.page_tokens = static_cast<int>(pages.page_tokens);
  target.kv_heads = static_cast<int>(tables.kv_heads);
  target.total_slots = static_cast<int64_t>(pages.pages * pages.page_tokens);
  return target;
}

// Runs encode launches with a fresh failure word, waits, and names the first bad row.
template <typename Launch>
void run_encode(const DeviceBuffer& failure, void* stream, const char* what, Launch&& launch) {
  const unsigned long long none = ~0ull;
  auto* word = static_cast<unsigned long long*>(failure.get());
  check_cuda(cudaMemcpyAsync(word, &none, sizeof none, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
             "cuda encode: reset");
  launch(word);
  unsigned long long found = none;
  check_cuda(cudaMemcpyAsync(&found, word, sizeof found, cudaMemcpyDeviceToHost, static_cast<cudaStream_t>(stream)),
             "cuda encode: read back");
  check_cuda(cudaStreamSynchronize(static_cast<cudaStream_t>(stream)), "cuda encode");
  if (found == none) return;
  const unsigned long long row = found / 4, reason = found % 4;
  require(reason != 0, "cuda: {} row {} has a slot outside the page store", what, row);
  require(reason != 1, "cuda encode: {} row {} has a NaN or Inf", what, row);
  require(reason != 2, "cuda encode: {} row {} has a norm beyond the float range", what, row);
  require(reason != 3, "cuda encode: {} row {} needs a norm beyond the fp16 range ({}); use the CPU codec with norm=fp32",
          what, row, kHalfMax);
}

}  // namespace

void check_page_tokens(size_t page_tokens, const char* who) {
  require(page_tokens > 0 && page_tokens % 16 == 0, "{}: page_tokens is {}; the kernels take a positive multiple of 16",
          who, page_tokens);
}

void check_page_store(const DeviceLayerCodecs& codecs, const DevicePages& pages, const char* who) {
  require(pages.key_indices && pages.key_norms && pages.value_indices && pages.value_norms,
          "{}: the page store has a null plane", who);
  require(!codecs.residual_signs() || pages.key_gammas,
          "{}: the keys are tq_prod, and the page store has no key_gammas plane", who);
  check_page_tokens(pages.page_tokens, who);
}

void DeviceLayerCodecs::encode_rows(Part part, size_t head, const float* x, size_t n, uint8_t* rows, void* stream) const {
  require(head < kv_heads(), "cuda encode_rows: head {} of {} KV heads", head, kv_heads());
  require(n == 0 || (x && rows), "cuda encode_rows: null device pointer for {} rows", n);
  detail::EncodeTarget target;
  target.rows = rows;
  target.row_stride = code_bytes(part);
  run_encode(tables_->failure, stream, part == Part::kKeys ? "key" : "value", [&](unsigned long long* failure) {
    check_cuda(detail::launch_encode(tables_->part(part), static_cast<int>(head), 1, x, tables_->dim, 0, n, target,
                                     failure, stream),
               "cuda encode_rows");
  });
}

void DeviceLayerCodecs::encode_into_pages(const float* keys, const float* values, size_t tokens, const int64_t* slots,
                                          const DevicePages& pages, void* stream) const {
  check_page_store(*this, pages, "cuda encode_into_pages");
  require(tokens == 0 || (keys && values && slots), "cuda encode_into_pages: null device pointer for {} tokens", tokens);
  const size_t row_stride = kv_heads() * head_dim();
  for (Part part : {Part::kKeys, Part::kValues}) {
    const detail::EncodeTarget target = page_target(*tables_, part, pages, slots);
    run_encode(tables_->failure, stream, part == Part::kKeys ? "key" : "value", [&](unsigned long long* failure) {
      check_cuda(detail::launch_encode(tables_->part(part), 0, static_cast<int>(kv_heads()),
                                       part == Part::kKeys ? keys : values, row_stride, head_dim(), tokens, target,
                                       failure, stream),
                 "cuda encode_into_pages");
    });
  }
}

void DeviceLayerCodecs::store_rows(Part part, size_t head, const uint8_t* rows, size_t n, const int64_t* slots,
                                   const DevicePages& pages, void* stream) const {
  check_page_store(*this, pages, "cuda store_rows");
  require(head < kv_heads(), "cuda store_rows: head {} of {} KV heads", head, kv_heads());
  require(n == 0 || (rows && slots), "cuda store_rows: null device pointer for {} rows", n);
  const detail::EncodeTarget target = page_target(*tables_, part, pages, slots);
  run_encode(tables_->failure, stream, part == Part::kKeys ? "key" : "value", [&](unsigned long long* failure) {
    check_cuda(detail::launch_store_rows(tables_->part(part), rows, code_bytes(part), static_cast<int>(head), n, target,
                                         failure, stream),
               "cuda store_rows");
  });
}


}  // namespace kvsketch::cuda

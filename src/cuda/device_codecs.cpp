// DeviceLayerCodecs: the checks of what the kernels support, and the codecs' rotations and
// codebooks copied to the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>

#include <cmath>

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
  body.key_bits = keys.codebook.bits;
  body.key_signs = keys.signs;
  body.key_codebook = keys.codebook;
  body.key_rotation = keys.rotation;
  if (!keys.signs) return;
  body.sign_table = sign_table_view();
  body.key_sketch = keys.sketch;
  body.key_sketch_matrix = keys.sketch_matrix;
  // A Hadamard sketch's rows are sqrt(dim) times its block's transform; a dense one is S itself.
  const float rows_scale = keys.sketch_matrix ? 1.0f : static_cast<float>(std::sqrt(static_cast<double>(keys.rotation.dim)));
  body.sketch_scale = rows_scale * keys.sign_scale;
}

}  // namespace detail

namespace {

void check_head_dim(size_t dim) {
  require(dim == 64 || dim == 128 || dim == 256, "cuda: head_dim {} is not supported; the GPU kernels take 64, 128 or 256",
          dim);
}

// keys: whether tq_prod is taken (its signs are scored, never summed as values).
const TurboQuant& supported_codec(const VectorCodec& codec, const char* role, size_t head, bool keys) {
  const VectorCodec* inner = &codec;
  if (const auto* quads = dynamic_cast<const QuadRowsCodec*>(inner)) inner = &quads->inner();
  const auto* tq = dynamic_cast<const TurboQuant*>(inner);
  require(tq != nullptr, "cuda: the {} codec of KV head {} is {}; the GPU kernels take {}", role, head, codec.spec(),
          keys ? "tq_mse, tq_prod or qjl keys" : "tq_mse values (tq_prod and qjl are for keys)");
  const TurboQuantOptions& options = tq->options();
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
  check_head_dim(codec.dim());
  return *tq;
}

const Qjl* qjl_of(const VectorCodec& codec) {
  const VectorCodec* inner = &codec;
  if (const auto* quads = dynamic_cast<const QuadRowsCodec*>(inner)) inner = &quads->inner();
  return dynamic_cast<const Qjl*>(inner);
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
  PendingRotation rotation, sketch;
  bool dense_sketch = false;
  size_t matrix_at = 0;

  void resolve(const float* device) {
    rotation.resolve(device);
    view.rotation = rotation.view;
    if (!view.signs) return;
    sketch.resolve(device);
    view.sketch = sketch.view;
    if (dense_sketch) view.sketch_matrix = device + matrix_at;
  }
};

// QJL keys: signs of S k (m = dim) and the norm; S a Hadamard block or a dense matrix per head.
PendingPart plan_qjl_part(const std::vector<const VectorCodec*>& codecs, std::vector<float>& host) {
  PendingPart pending;
  const Qjl& first = supported_qjl(*codecs.front(), 0);
  const QjlOptions& options = first.options();
  const size_t dim = first.dim();
  pending.view.signs = true;
  pending.view.packed_bytes = static_cast<int>(dim / 8);
  pending.view.sign_scale = first.inlier_scale();
  pending.rotation.view.dim = static_cast<int>(dim);  // no rotation: 0 steps
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

PendingPart plan_part(const std::vector<const VectorCodec*>& codecs, const char* role, bool keys,
                      std::vector<float>& host) {
  if (keys && qjl_of(*codecs.front())) return plan_qjl_part(codecs, host);
  PendingPart pending;
  const TurboQuant& first = supported_codec(*codecs.front(), role, 0, keys);
  const TurboQuantOptions& options = first.options();
  const ScalarCodeStage& scalar = first.scalar_stage();
  pending.view.codebook = detail::codebook_view(scalar.codebook(), scalar.bits());
  pending.view.rescale = options.rescale;
  pending.view.signs = options.residual_signs;
  pending.view.packed_bytes = static_cast<int>(scalar.bytes() + (options.residual_signs ? first.dim() / 8 : 0));
  pending.view.sign_scale = first.sign_scale();
  std::vector<RandomizedHadamard::Plan> rotations, sketches;
  for (size_t h = 0; h < codecs.size(); ++h) {
    const TurboQuant& codec = supported_codec(*codecs[h], role, h, keys);
    require(codec.dim() == first.dim() && codec.options().bits == options.bits &&
                codec.options().rescale == options.rescale && codec.options().rounds == options.rounds &&
                codec.options().residual_signs == options.residual_signs,
            "cuda: the {} codecs differ between KV heads 0 ({}) and {} ({}); a layer's heads share one spec up to the seed",
            role, codecs.front()->spec(), h, codecs[h]->spec());
    rotations.push_back(dynamic_cast<const RandomizedHadamard&>(codec.rotation()).plan());
    if (options.residual_signs) sketches.push_back(codec.sketch()->hadamard_block(0)->plan());
  }
  pending.rotation = plan_rotation(rotations, first.dim(), host);
  if (options.residual_signs) pending.sketch = plan_rotation(sketches, first.dim(), host);
  return pending;
}

}  // namespace

namespace detail {

PartView part_view_on_host(const std::vector<const VectorCodec*>& codecs, std::vector<float>& storage) {
  storage.clear();
  PendingPart pending = plan_part(codecs, "host", true, storage);
  pending.resolve(storage.data());
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
  std::vector<float> host;
  PendingPart key_part = plan_part(keys, "key", true, host), value_part = plan_part(values, "value", false, host);
  require(keys.front()->dim() == values.front()->dim(), "cuda: keys of dim {} but values of dim {}",
          keys.front()->dim(), values.front()->dim());
  tables_ = std::make_unique<Tables>();
  tables_->kv_heads = keys.size();
  tables_->dim = keys.front()->dim();
  tables_->memory = DeviceBuffer(host.size() * sizeof(float));
  copy_to_device(tables_->memory.get(), host.data(), host.size() * sizeof(float));
  key_part.resolve(static_cast<const float*>(tables_->memory.get()));
  value_part.resolve(static_cast<const float*>(tables_->memory.get()));
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
int DeviceLayerCodecs::bits(Part part) const {
  const detail::PartView& view = tables_->part(part);
  return view.codebook.bits + (view.signs ? 1 : 0);
}
bool DeviceLayerCodecs::residual_signs() const { return tables_->keys.gammas(); }
size_t DeviceLayerCodecs::packed_bytes(Part part) const { return static_cast<size_t>(tables_->part(part).packed_bytes); }
size_t DeviceLayerCodecs::code_bytes(Part part) const { return packed_bytes(part) + 2 * tables_->part(part).factors(); }

namespace {

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
    detail::EncodeTarget target;
    target.slots = slots;
    target.indices = part == Part::kKeys ? pages.key_indices : pages.value_indices;
    target.norms = part == Part::kKeys ? pages.key_norms : pages.value_norms;
    target.gammas = part == Part::kKeys && residual_signs() ? pages.key_gammas : nullptr;
    target.page_tokens = static_cast<int>(pages.page_tokens);
    target.kv_heads = static_cast<int>(kv_heads());
    target.total_slots = static_cast<int64_t>(pages.pages * pages.page_tokens);
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
  const bool keys = part == Part::kKeys;
  detail::EncodeTarget target;
  target.slots = slots;
  target.indices = keys ? pages.key_indices : pages.value_indices;
  target.norms = keys ? pages.key_norms : pages.value_norms;
  target.gammas = keys && residual_signs() ? pages.key_gammas : nullptr;
  target.page_tokens = static_cast<int>(pages.page_tokens);
  target.kv_heads = static_cast<int>(kv_heads());
  target.total_slots = static_cast<int64_t>(pages.pages * pages.page_tokens);
  run_encode(tables_->failure, stream, keys ? "key" : "value", [&](unsigned long long* failure) {
    check_cuda(detail::launch_store_rows(rows, code_bytes(part), static_cast<int>(packed_bytes(part)),
                                         static_cast<int>(head), n, target, failure, stream),
               "cuda store_rows");
  });
}

}  // namespace kvsketch::cuda

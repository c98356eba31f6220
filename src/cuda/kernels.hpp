// The launchers of the CUDA kernels and the plain structs they take by value (compiled by nvcc in
// the .cu files and called from the host code in the .cpp files, which validates every argument
// first: the launchers assume valid input).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsketch::cuda::detail {

inline constexpr int kMaxRotationSteps = 32;
inline constexpr int kMaxGroupHeads = 16;  // query heads per KV head: one mma tile of rows
inline constexpr int kMaxParts = 2;        // a channel split's parts

// The layout code of a body's keys or values (the kernels' template arguments): b (one part of
// b-bit indices over the whole head; 16 the fp16 body; tq_prod's scalar part b - 1; QJL 0), or a
// channel split of the shorthand tq_mse:b=2.5 (kSplit25: a quarter of the channels at 3 bits, the
// rest at 2) or b=3.5 (kSplit35: 4 and 3), each part with its own rotation and norm.
inline constexpr int kSplit25 = 25, kSplit35 = 35;

// A RandomizedHadamard::Plan per head on the device: factors [heads][steps][window], flips
// [heads][dim] (null where every flip is +1).
struct RotationView {
  const float* factors = nullptr;
  const float* flips = nullptr;
  int dim = 0, window = 0, steps = 0;
  int offsets[kMaxRotationSteps] = {};
};

struct CodebookView {
  int bits = 0;
  float centroids[16] = {};
  float boundaries[15] = {};
  // fp16 bits of the centroids (b <= 3), or of the upper half's magnitudes (b = 4, whose codebook
  // is symmetric), as byte tables for the kernels' byte-permute look-ups: low bytes, high bytes.
  uint32_t low_bytes[2] = {}, high_bytes[2] = {};
};

}  // namespace kvsketch::cuda::detail

namespace kvsketch {
struct Codebook;
class VectorCodec;
}

namespace kvsketch::cuda::detail {

// The view of a codebook of `bits` bits (host code; refuses a 4-bit codebook that is not
// symmetric).
CodebookView codebook_view(const Codebook& codebook, int bits);

// The view of the 1-bit table {-1, +1} of QJL signs.
CodebookView sign_table_view();

// A TurboQuant quantizer of some of a head's channels (all of them, or one part of a channel
// split): its rotation (of rotation.dim channels) and codebook, each with its own fp16 norm.
struct ScalarPart {
  RotationView rotation;
  CodebookView codebook;
  bool rescale = false;
  int packed_bytes = 0;  // rotation.dim * codebook.bits / 8
};

// One role's codecs (keys or values): tq_mse (one part); the channel split of tq_mse:b=2.5 or 3.5
// (two parts over the channels `channels` lists); tq_prod (keys only): its scalar part at b - 1
// bits, then the QJL signs of the residual; QJL (keys only): signs alone (a part of 0 bits and no
// rotation).
struct PartView {
  int dim = 0;
  ScalarPart parts[kMaxParts];
  int part_count = 1;
  const uint16_t* channels = nullptr;  // a split's: [heads][dim], part 0's channels, then part 1's
  int packed_bytes = 0;  // a token's bytes in the index plane: the parts' indices, then the signs
  bool signs = false;    // signs follow the scalar indices (m = dim of them)
  RotationView sketch;   // the sketch's Hadamard block (steps 0 where it is dense)
  const float* sketch_matrix = nullptr;  // a dense sketch: [heads][dim columns][dim rows]
  float sign_scale = 0.0f;  // sqrt(pi/2) / (m * bias factor), the CPU codec's
  const float* mean = nullptr;  // center: the mean each head's rows are encoded less ([heads][dim])
  // tq_prod: after the norm, the row holds the residual's norm gamma.
  bool gammas() const { return signs && parts[0].codebook.bits > 0; }
  int factors() const { return part_count + (gammas() ? 1 : 0); }  // fp16 norms of a CPU row
  // The kernels' layout code: b, or kSplit25 / kSplit35.
  int layout() const {
    if (part_count == 1) return parts[0].codebook.bits;
    return parts[1].codebook.bits == 2 ? kSplit25 : kSplit35;
  }
};

// What DeviceLayerCodecs copies to the device: the rotations' and sketches' floats, and the
// splits' channel lists.
struct HostTables {
  std::vector<float> floats;
  std::vector<uint16_t> channels;
};

// The view DeviceLayerCodecs builds of one part's codecs (one per head), its tables in `storage`
// (host memory) rather than on the device: for running the kernels' functions on the host.
// Checks the codecs as DeviceLayerCodecs does.
PartView part_view_on_host(const std::vector<const VectorCodec*>& codecs, HostTables& storage);

// Where encode writes: the CPU rows (indices, then the fp16 norm) one after another, or the
// planes of a page store at slots.
struct EncodeTarget {
  uint8_t* rows = nullptr;  // rows mode when non-null
  size_t row_stride = 0;
  const int64_t* slots = nullptr;
  uint8_t* indices = nullptr;
  uint16_t* norms = nullptr;
  uint16_t* gammas = nullptr;  // tq_prod's residual norms (pages mode)
  int norms_per_token = 1;     // a split's parts each have one (pages mode)
  int page_tokens = 0, kv_heads = 0;
  int64_t total_slots = 0;  // pages * page_tokens
};

// x: row i of head h at x + i * row_stride + h * head_stride (a split's parts gather their channels
// from it). Encodes heads [first_head,
// first_head + heads). *failure (device) takes the smallest (row * 4 + reason) of a row that
// cannot be encoded: reason 0 a slot outside the store, 1 a NaN or Inf, 2 a norm beyond the float
// range, 3 beyond fp16.
int launch_encode(const PartView& part, int first_head, int heads, const float* x, size_t row_stride,
                  size_t head_stride, size_t n, const EncodeTarget& target, unsigned long long* failure, void* stream);

// Rows (n x row_bytes) split into page planes at slots (target.slots, indices, norms, and gammas
// where it is set); failure as launch_encode's, reason 0.
int launch_store_rows(const PartView& part, const uint8_t* rows, size_t row_bytes, int head, size_t n,
                      const EncodeTarget& target, unsigned long long* failure, void* stream);

struct BatchView {
  int batch = 0;
  const int32_t* block_tables = nullptr;
  int max_pages = 0;
  const int32_t* body_tokens = nullptr;
  int max_body_tokens = 0;
  const uint16_t* exact_keys = nullptr;
  const uint16_t* exact_values = nullptr;
  const int32_t* exact_tokens = nullptr;
  int exact_capacity = 0;
};

// The body: codes (key_bits/value_bits: layout codes 2..4, or kSplit25 / kSplit35; tq_prod
// keys: key_bits 1..3 of the scalar part and key_signs; QJL keys: key_bits 0 and key_signs) or fp16
// (bits 16; indices pointers hold the halves). Norm planes hold one norm per part and token.
struct BodyView {
  int key_bits = 0, value_bits = 0;
  bool key_signs = false;
  const uint8_t* key_indices = nullptr;  // tq_prod: each token's scalar indices, then its signs
  const uint16_t* key_norms = nullptr;
  const uint16_t* key_gammas = nullptr;  // tq_prod
  const uint8_t* value_indices = nullptr;
  const uint16_t* value_norms = nullptr;
  int page_tokens = 0;
  CodebookView key_codebook, value_codebook;
  RotationView key_rotation, value_rotation;  // steps 0: the fp16 body, no rotation
  // A split's second part, and the channel of each coordinate of the parts' domain ([heads][dim]).
  CodebookView key_codebook1, value_codebook1;
  RotationView key_rotation1, value_rotation1;
  const uint16_t* key_channels = nullptr;
  const uint16_t* value_channels = nullptr;
  // center: the means ([heads][dim]): keys' scores gain <q, mean>, values' sums mean * the weights.
  const float* key_mean = nullptr;
  const float* value_mean = nullptr;
  // tq_prod keys: the signs' table, the sketch, and the sketched query's factor (sqrt(dim) of the
  // sketch's rows times the sign scale).
  CodebookView sign_table;
  RotationView key_sketch;
  const float* key_sketch_matrix = nullptr;
  float sketch_scale = 0.0f;
};

// The fields of a body from the keys' and values' views (host code): codes, tables, rotations,
// channels and sketch.
void bind_keys(const PartView& keys, BodyView& body);
void bind_values(const PartView& values, BodyView& body);

struct DecodeShape {
  int dim = 0, kv_heads = 0, group = 0;  // group: query heads per KV head
  float scale = 0.0f;                    // softmax scale, 1/sqrt(dim)
};

// Floats of scratch decode needs for this shape and batch, and the split it will use.
size_t decode_workspace_floats(const DecodeShape& shape, const BatchView& batch);

int launch_decode(const DecodeShape& shape, const BodyView& body, const BatchView& batch, const float* queries,
                  float* output, float* lse, float* workspace, void* stream);

}  // namespace kvsketch::cuda::detail

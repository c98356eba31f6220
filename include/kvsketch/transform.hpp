// Random orthogonal transforms (rotations) and random projections (sketches) of any dimension.
//
// Rotation: x -> Pi x with Pi orthogonal, so norms and inner products are preserved exactly (up to
// float rounding). Two kinds:
//   RandomizedHadamard  R rounds of (random signs, Walsh-Hadamard); for d not a power of two each
//                       round applies the 2^k-point transform to the head window [0, p) and then to
//                       the tail window [d-p, d) (p = largest power of two <= d), each after its own
//                       random signs. O(d log d) per vector.
//   HaarRotation        dense Haar-distributed Q from the QR of a Gaussian matrix with the sign fix
//                       Q * diag(sign(R_ii)). O(d^2) per vector.
//
// Sketch: x -> S x with S an m x d matrix (m any >= 1), used by QJL. Three kinds:
//   Gaussian            i.i.d. N(0,1) entries (the papers' theory).
//   Orthogonal          blocks of d rows, each block sqrt(d) * (Haar orthogonal), as the QJL authors
//                       do (plus the sign fix they omit); the last block is truncated.
//   Hadamard            blocks of d rows, each sqrt(d) * RandomizedHadamard: O(d log d) per block.
// Orthogonal and Hadamard rows have norm exactly sqrt(d).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// The library is built with hidden visibility: what this header declares is its exported API.
#pragma GCC visibility push(default)
namespace kvsketch {

class Rotation {
 public:
  virtual ~Rotation() = default;
  virtual size_t dim() const = 0;
  // out = Pi x (in-place allowed: out == x).
  virtual void apply(const float* x, float* out) const = 0;
  // out = Pi y with y[j] = x[j] * scale (rounded as such): the same bits as scaling a copy and
  // applying, in one pass less (in-place allowed).
  virtual void apply_scaled(const float* x, float scale, float* out) const = 0;
  // out = Pi^T x (in-place allowed).
  virtual void apply_transpose(const float* x, float* out) const = 0;
  virtual std::string name() const = 0;
  // Memory held (signs, or the dense matrix).
  virtual size_t bytes() const = 0;
};

class RandomizedHadamard final : public Rotation {
 public:
  RandomizedHadamard(size_t dim, int rounds, uint64_t seed);
  size_t dim() const override { return dim_; }
  void apply(const float* x, float* out) const override { apply_scaled(x, 1.0f, out); }
  void apply_scaled(const float* x, float scale, float* out) const override;
  void apply_transpose(const float* x, float* out) const override;
  std::string name() const override;
  size_t bytes() const override;
  int rounds() const { return rounds_; }

  // The rotation as data, for back ends that apply the same transform elsewhere (the CUDA
  // kernels): out = flips * H(window at offsets[S-1]) * diag(factors[S-1]) ... H(window at
  // offsets[0]) * diag(factors[0]) * x, each step's factors scaling its window before the
  // unnormalized Walsh-Hadamard transform of that window (coordinates outside a window untouched),
  // then final_flips (dim entries of +-1).
  struct Plan {
    size_t window;
    std::vector<size_t> offsets;  // one per step
    std::vector<float> factors;   // steps x window
    std::vector<float> final_flips;
  };
  Plan plan() const;

 private:
  // A step draws signs +-1/sqrt(p) inside its window and +-1 outside, multiplies, then transforms
  // the window. A +-1 flip outside the window commutes with the transform, so it is deferred: it
  // joins the factors of the next window that covers the coordinate, or the final flips. Products
  // with +-1 are exact, so the bits equal those of multiplying every step in full.
  struct Step {
    size_t offset;               // window start
    std::vector<float> factors;  // window_ entries: the step's signs times the deferred flips
  };
  void apply_final_flips(float* data) const;

  size_t dim_;
  size_t window_;  // largest power of two <= dim_
  int rounds_;
  std::vector<Step> steps_;
  std::vector<float> final_flips_;  // dim_ entries of +-1 applied after the last step
};

class HaarRotation final : public Rotation {
 public:
  HaarRotation(size_t dim, uint64_t seed);
  size_t dim() const override { return dim_; }
  void apply(const float* x, float* out) const override { apply_scaled(x, 1.0f, out); }
  void apply_scaled(const float* x, float scale, float* out) const override;
  void apply_transpose(const float* x, float* out) const override;
  std::string name() const override { return "haar"; }
  size_t bytes() const override { return (columns_.size() + transposed_.size()) * sizeof(float); }

 private:
  size_t dim_;
  std::vector<float> columns_;     // Pi^T stored column-major = Pi row-major; see .cpp
  std::vector<float> transposed_;  // Pi stored column-major
};

enum class RotationKind { kHadamard, kHaar };
std::unique_ptr<Rotation> make_rotation(RotationKind kind, size_t dim, uint64_t seed, int hadamard_rounds = 2);

// A Haar-distributed orthogonal n x n matrix, row-major, double precision, from `stream_seed`.
std::vector<double> haar_orthogonal_matrix(size_t n, uint64_t stream_seed);

enum class SketchKind { kGaussian, kOrthogonal, kHadamard };
SketchKind parse_sketch_kind(const std::string& text);
std::string sketch_kind_name(SketchKind kind);

// Dense sketches (Gaussian, orthogonal) hold rows x dim floats: at most this many (64 MB); the
// Hadamard sketch holds signs only and takes any size.
inline constexpr size_t kMaxDenseSketchValues = size_t{1} << 24;

class Sketch {
 public:
  Sketch(SketchKind kind, size_t rows, size_t dim, uint64_t seed, int hadamard_rounds = 2);
  size_t rows() const { return rows_; }
  size_t dim() const { return dim_; }
  SketchKind kind() const { return kind_; }
  // out[0..rows) = S x. Bit-identical on every machine.
  void project(const float* x, float* out) const;
  // out = S x up to a factor >= 1 per row: the same signs as S x, in less work.
  void project_signs_only(const float* x, float* out) const { project(x, out, false); }
  // out[0..dim) += S^T z (z has rows entries).
  void project_transpose_add(const float* z, float* out) const;
  // E[ (s.y) sign(s.x) ] = bias_factor() * sqrt(2/pi) <x,y>/||x|| for one row s: 1 for Gaussian
  // rows, c_d = sqrt(pi/2) sqrt(d) Gamma(d/2)/(sqrt(pi) Gamma((d+1)/2)) for rows uniform on the
  // sphere of radius sqrt(d). QJL divides its scale by it, which makes Orthogonal exactly unbiased.
  double bias_factor() const { return bias_factor_; }
  // Memory held: the dense matrix, or the Hadamard blocks' signs.
  size_t bytes() const;
  // The Hadamard kind's block b (S x's rows [b dim, (b + 1) dim) are sqrt(dim) times its
  // transform of x), for back ends that apply the sketch elsewhere; null for the dense kinds.
  const RandomizedHadamard* hadamard_block(size_t b) const {
    return b < blocks_.size() ? blocks_[b].get() : nullptr;
  }
  // The dense kinds' S, column-major (dim columns of rows floats); empty for the Hadamard kind.
  const std::vector<float>& matrix() const { return columns_; }

 private:
  void project(const float* x, float* out, bool scaled) const;
  SketchKind kind_;
  size_t rows_, dim_;
  double bias_factor_;
  std::vector<float> columns_;  // dense kinds: S column-major (dim columns of `rows` floats)
  std::vector<std::unique_ptr<RandomizedHadamard>> blocks_;  // Hadamard kind
  float block_scale_ = 1.0f;
};

// c_d above.
double sphere_row_bias_factor(size_t dim);

}  // namespace kvsketch
#pragma GCC visibility pop

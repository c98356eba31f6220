#include "model/linear.hpp"

#include <Eigen/Dense>

namespace kvsketch::model {
namespace {

constexpr size_t kParallelGemvValues = size_t{1} << 14;

}  // namespace

void linear(const float* x, size_t rows, size_t in, const float* weight, size_t out, const float* bias, float* y) {
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const auto n = static_cast<Eigen::Index>(in), m = static_cast<Eigen::Index>(out);
  if (rows == 1) {
    const Eigen::Map<const Eigen::VectorXf> v(x, n);
    // Each output is one dot product whatever the thread count: the same bits on any machine size.
    // Threads only for a large matrix: a small one takes microseconds, less than waking them.
#pragma omp parallel for schedule(static) if (static_cast<size_t>(m) * in >= kParallelGemvValues)
    for (Eigen::Index o = 0; o < m; ++o)
      y[o] = Eigen::Map<const Eigen::VectorXf>(weight + o * n, n).dot(v) + (bias ? bias[o] : 0.0f);
    return;
  }
  // W^T is W's bytes read column-major.
  const Eigen::Map<const Eigen::MatrixXf> wt(weight, n, m);
  const Eigen::Map<const RowMatrix> xs(x, static_cast<Eigen::Index>(rows), n);
  Eigen::Map<RowMatrix> ys(y, static_cast<Eigen::Index>(rows), m);
  ys.noalias() = xs * wt;
  if (bias) ys.rowwise() += Eigen::Map<const Eigen::RowVectorXf>(bias, m);
}

}  // namespace kvsketch::model

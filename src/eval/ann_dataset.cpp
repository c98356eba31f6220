// Datasets of `kvsketch ann eval`: files, the bundled SIFT sample, Fashion-MNIST from its Debian
// package, and synthetic unit-norm Gaussian vectors.
#include <cmath>
#include <filesystem>

#include "codec/spec_parser.hpp"
#include "kvsketch/eval/ann_eval.hpp"
#include "core/require.hpp"
#include "kvsketch/random.hpp"

#ifndef KVSKETCH_DATA_DIR
#define KVSKETCH_DATA_DIR "data"
#endif

namespace kvsketch {
namespace {

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }
bool is_hdf5(const std::string& name) { return contains(name, ".hdf5") || contains(name, ".h5"); }

Matrix first_rows(const Matrix& m, size_t rows) {
  Matrix out;
  out.rows = rows;
  out.cols = m.cols;
  out.values.assign(m.values.begin(), m.values.begin() + static_cast<std::ptrdiff_t>(rows * m.cols));
  return out;
}

Matrix last_rows(const Matrix& m, size_t rows) {
  Matrix out;
  out.rows = rows;
  out.cols = m.cols;
  out.values.assign(m.values.end() - static_cast<std::ptrdiff_t>(rows * m.cols), m.values.end());
  return out;
}

// One file: the last `queries` rows are the queries (default 500), the rest the base.
AnnDataset split_tail(std::string name, const Matrix& all, size_t queries, Metric metric) {
  if (queries == 0) queries = 500;
  require(queries < all.rows, "dataset {}: --queries {} leaves no base vectors ({} rows)", name, queries, all.rows);
  AnnDataset data{std::move(name), first_rows(all, all.rows - queries), last_rows(all, queries), metric};
  return data;
}

AnnDataset gaussian(const std::string& spec, size_t queries) {
  const ParsedSpec parsed = parse_spec(spec, "dataset");
  const SpecParameters p(parsed.name, parsed.values, {"d", "n", "seed", "decay"}, "dataset");
  const size_t d = static_cast<size_t>(p.integer("d", 1536, 2, 65536));
  const size_t n = static_cast<size_t>(p.integer("n", 100000, 1, 100000000));
  const uint64_t seed = static_cast<uint64_t>(p.integer("seed", 1, 0, INT64_MAX));
  // decay=H scales coordinate j by 1 / (1 + j / H) before the normalization: variance falling over
  // the coordinates like the spectrum of real embeddings and images (0, the default: isotropic).
  const double decay = p.real("decay", 0.0, 0.0, 1e9);
  std::vector<float> spread(d, 1.0f);
  if (decay > 0.0)
    for (size_t j = 0; j < d; ++j) spread[j] = static_cast<float>(1.0 / (1.0 + static_cast<double>(j) / decay));
  if (queries == 0) queries = 1000;
  Matrix all;
  all.rows = n + queries;
  all.cols = d;
  all.values.resize(all.rows * d);
  // Rows are drawn from per-row streams: the same vectors for any thread count.
#pragma omp parallel for schedule(static)
  for (long r = 0; r < static_cast<long>(all.rows); ++r) {
    RandomStream rng(seed, StreamPurpose::kData, {0x9a55, static_cast<uint64_t>(r)});
    float* row = all.values.data() + static_cast<size_t>(r) * d;
    double square = 0.0;
    for (size_t j = 0; j < d; ++j) {
      row[j] = static_cast<float>(rng.gaussian()) * spread[j];
      square += static_cast<double>(row[j]) * row[j];
    }
    const float scale = static_cast<float>(1.0 / std::sqrt(square));
    for (size_t j = 0; j < d; ++j) row[j] *= scale;
  }
  std::string name = fmt::format("gaussian:d={},n={},seed={}", d, n, seed);
  if (decay > 0.0) name += fmt::format(",decay={}", decay);
  return {std::move(name), first_rows(all, n), last_rows(all, queries), Metric::kInnerProduct};
}

}  // namespace

bool is_matrix_file_dataset(const std::string& name) {
  return name != "sift-5k" && name != "fashion-mnist" && name.rfind("gaussian", 0) != 0 && !is_hdf5(name);
}

AnnDataset load_ann_dataset(const std::string& name, size_t queries, std::optional<Metric> metric) {
  AnnDataset data;
  if (name == "sift-5k") {
    data = split_tail(name, read_matrix(std::string(KVSKETCH_DATA_DIR) + "/sift-5k.tsv:ids"), queries, Metric::kL2);
  } else if (name == "fashion-mnist") {
    const std::string dir = kFashionMnist;
    require(std::filesystem::exists(dir + "/train-images-idx3-ubyte.gz"),
            "dataset fashion-mnist: {} not found; install the Debian package dataset-fashion-mnist", dir);
    const Matrix test = read_matrix(dir + "/t10k-images-idx3-ubyte.gz");
    const size_t count = queries == 0 ? test.rows : queries;
    require(count <= test.rows, "dataset fashion-mnist: --queries {} exceeds its {} test images", count, test.rows);
    data = {name, read_matrix(dir + "/train-images-idx3-ubyte.gz"), first_rows(test, count), Metric::kL2};
  } else if (name.rfind("gaussian", 0) == 0) {
    data = gaussian(name, queries);
  } else if (is_hdf5(name)) {
    const Matrix test = read_hdf5(name, "test");
    const size_t count = queries == 0 ? test.rows : std::min(queries, test.rows);
    const Metric own = contains(name, "angular") || contains(name, "cosine") ? Metric::kCosine
                       : contains(name, "-dot") || contains(name, "-ip")  ? Metric::kInnerProduct
                                                                          : Metric::kL2;
    data = {name, read_hdf5(name, "train"), first_rows(test, count), own};
  } else {
    data = split_tail(name, read_matrix(name), queries, Metric::kL2);
  }
  require(data.base.cols == data.queries.cols, "dataset {}: base vectors have dimension {}, queries {}", name,
          data.base.cols, data.queries.cols);
  if (metric) data.metric = *metric;
  return data;
}

}  // namespace kvsketch

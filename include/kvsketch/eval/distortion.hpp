// The TurboQuant paper's empirical validation (section 2.1, Theorems 1-2), for any codec:
// quantize unit vectors, measure the MSE, and measure inner-product estimates against queries
// with a planted correlation.
//
// For base vector x_i and query direction z_j the query is
//   y_ij = rho_j x_i + sqrt(1 - rho_j^2) (z_j - t x_i) / sqrt(1 - t^2),   t = <z_j, x_i>,
// a unit vector with <y_ij, x_i> = rho_j exactly, rho_j spread evenly over (0, 0.9). Estimates are
// linear in y, so <y_ij, x~_i> comes from <x_i, x~_i> and the codec's scores for z_j.
//   mse             mean ||x - x~||^2
//   ip_bias         mean of <y, x~> - <y, x>; ip_bias_stderr treats each base vector as one
//                   independent sample (its queries share its quantization error)
//   ip_bias_factor  least-squares slope (through 0) of the estimate on the truth
//   ip_var_d        d * variance of the inner-product error around its mean at each rho (for a
//                   biased codec this leaves out the bias itself, which ip_bias_factor reports)
// Bounds are given only where a theorem makes them hold for the rows measured:
//   mse_upper_bound       sqrt(3) pi / 2 * 4^-b, Theorem 1: tq_mse rows, any unit input
//   ip_var_d_upper_bound  sqrt(3) pi^2 * 4^-b, Theorem 2: tq_prod rows (unbiased TurboQuant)
//   mse_lower_bound       4^-b, Lemma 3: any codec of b bits per coordinate, inputs uniform on the
//                         sphere only (input "random"); e1, sparse and files are particular inputs,
//                         which a quantizer may well reproduce below it
// QJL promised no such bounds, and Theorem 3's inner-product lower bound holds for one hard query
// direction, not for these queries: neither is reported.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvsketch {

struct DistortionConfig {
  size_t dim = 0;                   // 0: take it from the input file
  std::vector<int> bits = {1, 2, 3, 4};
  std::vector<std::string> codecs = {"tq_mse", "tq_prod"};  // tq_mse, tq_prod, qjl (m = b * dim)
  std::string options;              // appended to every spec, e.g. "rotation=haar"
  size_t vectors = 1000;
  size_t queries = 64;
  uint64_t seed = 1;
  // Codec seeds seed, seed+1, ...: the theorems hold in expectation over the rotation, and real
  // data whose vectors share a direction (SIFT is non-negative) needs that average.
  size_t codec_seeds = 1;
  std::string input = "random";     // random | e1 | sparse | path to .tsv/.fvecs/.npy
};

struct DistortionRow {
  std::string codec;
  std::string spec;
  int bits = 0;
  size_t dim = 0;
  double mse = 0, ip_bias = 0, ip_bias_stderr = 0, ip_bias_factor = 0, ip_var_d = 0;
  std::optional<double> mse_lower_bound, mse_upper_bound, ip_var_d_upper_bound;  // where they hold (above)
  size_t code_bytes = 0;
};

std::vector<DistortionRow> run_distortion(const DistortionConfig& config);

}  // namespace kvsketch

// K-means for the IVF coarse quantizer: seeded, and the same bits on every machine and thread
// count (distances by the fixed-order dot product, sums in double in row order).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvsketch {

// nlist centroids (nlist x dim) of the n rows of x, after `iterations` Lloyd steps from nlist
// distinct rows drawn with `seed`. An emptied cluster takes the row farthest from its centroid.
std::vector<float> train_kmeans(const float* x, size_t n, size_t dim, size_t nlist, size_t iterations, uint64_t seed);

// For each of the n rows, the `top` centroids of largest similarity, best first (ties to the lower
// centroid): l2 (squared given: the centroids' squared norms) 2 <x, c> - ||c||^2, which ranks the
// nearest first; ip (squared null) <x, c>. Exactly what computing every similarity with
// fixed_order_dot ranks: a kernel gives all dot products approximately (float tiles or panels, or
// a bf16 screen on AMX for many rows), and those its error bound cannot rule out are recomputed in
// the fixed order. lists and dots (the fixed-order <x, c> of each
// chosen centroid) hold n x top. top <= nlist.
void nearest_centroids(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                       const std::vector<float>* squared, size_t top, uint32_t* lists, float* dots);

// The nearest centroid (L2) of each of the n rows; `squared` holds the centroids' squared norms.
void assign_nearest(const float* x, size_t n, size_t dim, const std::vector<float>& centroids,
                    const std::vector<float>& squared, uint32_t* assignment, float* distance = nullptr);

// Squared norms of the centroids (nlist of them), in the fixed order.
std::vector<float> squared_norms(const std::vector<float>& centroids, size_t dim);

}  // namespace kvsketch

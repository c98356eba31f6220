// A PagedKVCache and its body laid out as a page store: what the GPU tests (on the device) and
// the decode emulation (on the CPU) run the kernels on, to compare with the cache's own decode.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kvsketch/half.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/paged_cache.hpp"
#include "test_rows.hpp"

namespace kvsketch::cuda {

// A PagedKVCache filled with key-like rows, and the same cache laid out on the device: body codes
// encoded on the GPU into pages (one block table per sequence, pages handed out in order), fp16
// sinks and windows copied as the cache keeps them.
// Keys and values as attention sees them: a shared offset per channel and Gaussian spread, norms
// over a factor of 10 (scores of a few units, as a model's), two zero rows and a spike.
inline std::vector<float> attention_rows(size_t n, size_t dim, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> offset(dim), rows(n * dim);
  for (float& o : offset) o = normal(random);
  const float scales[3] = {0.3f, 1.0f, 3.0f};
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < dim; ++j) rows[i * dim + j] = scales[i % 3] * (offset[j] + normal(random));
  if (n > 3) {
    std::fill_n(rows.begin() + static_cast<std::ptrdiff_t>(dim), 2 * dim, 0.0f);
    rows[2 * dim + 5] = 5.0f;
  }
  return rows;
}

struct MirroredCache {
  size_t kv_heads, dim, q_heads;
  KVPolicy policy;
  PagedKVCache cache;
  std::vector<SequenceId> ids;
  std::vector<size_t> lengths;
  std::vector<std::vector<float>> keys, values;  // per sequence: tokens x kv_heads x dim

  MirroredCache(size_t heads, size_t head_dim, size_t query_heads, const std::string& spec,
                const std::vector<size_t>& sequence_lengths, uint64_t seed)
      : kv_heads(heads),
        dim(head_dim),
        q_heads(query_heads),
        policy(KVPolicy::parse(spec)),
        cache(1, heads, head_dim, policy, seed),
        lengths(sequence_lengths) {
    for (size_t b = 0; b < lengths.size(); ++b) {
      ids.push_back(cache.add_sequence());
      const size_t n = lengths[b];
      keys.push_back(attention_rows(n * kv_heads, dim, seed * 31 + b));
      values.push_back(attention_rows(n * kv_heads, dim, seed * 37 + b + 1000));
      // The cache takes [kv_heads][tokens][head_dim]; the device's appends [tokens][kv_heads][head_dim].
      const std::vector<float> head_keys = heads_first(keys.back(), n), head_values = heads_first(values.back(), n);
      cache.append(ids.back(), 0, head_keys.data(), head_values.data(), n);
    }
  }

  std::vector<float> heads_first(const std::vector<float>& rows, size_t n) const {
    std::vector<float> out(rows.size());
    for (size_t t = 0; t < n; ++t)
      for (size_t h = 0; h < kv_heads; ++h)
        std::copy_n(rows.begin() + (t * kv_heads + h) * dim, dim, out.begin() + (h * n + t) * dim);
    return out;
  }

  // The cache's split of n tokens: sinks, body, window (PagedKVCache's rule).
  size_t body_of(size_t n) const {
    if (n <= policy.sinks) return 0;
    const size_t rest = n - policy.sinks;
    return rest >= policy.window + policy.block ? (rest - policy.window) / policy.block * policy.block : 0;
  }
};

struct DeviceMirror {
  std::vector<int32_t> body, exact, tables;
  size_t max_pages = 1, max_body = 0, capacity = 1, page_tokens;
  std::vector<uint16_t> exact_keys, exact_values;
  std::vector<float> body_keys, body_values;  // tokens x kv_heads x dim, all sequences
  std::vector<int64_t> slots;
  size_t pages = 0;

  DeviceMirror(const MirroredCache& m, size_t page) : page_tokens(page) {
    const size_t batch = m.lengths.size(), row = m.kv_heads * m.dim;
    for (size_t b = 0; b < batch; ++b) {
      body.push_back(static_cast<int32_t>(m.body_of(m.lengths[b])));
      exact.push_back(static_cast<int32_t>(m.lengths[b] - body.back()));
      max_body = std::max<size_t>(max_body, body.back());
      max_pages = std::max<size_t>(max_pages, (body.back() + page - 1) / page);
      capacity = std::max<size_t>(capacity, exact.back());
    }
    tables.assign(batch * max_pages, 0);
    exact_keys.assign(batch * m.kv_heads * capacity * m.dim, 0);
    exact_values.assign(exact_keys.size(), 0);
    for (size_t b = 0; b < batch; ++b) {
      const size_t n = m.lengths[b], sinks = std::min(n, m.policy.sinks), count = body[b];
      // Pages in reverse order of sequences, so that block tables are not the identity.
      for (size_t p = 0; p < (count + page - 1) / page; ++p) tables[b * max_pages + p] = static_cast<int32_t>(pages++);
      for (size_t i = 0; i < count; ++i) {
        const size_t token = sinks + i;
        slots.push_back(static_cast<int64_t>(tables[b * max_pages + i / page]) * static_cast<int64_t>(page) +
                        static_cast<int64_t>(i % page));
        // The cache encodes its body from the window's fp16 rows: the same rows here.
        for (size_t j = 0; j < row; ++j) {
          body_keys.push_back(half_to_float(float_to_half(m.keys[b][token * row + j])));
          body_values.push_back(half_to_float(float_to_half(m.values[b][token * row + j])));
        }
      }
      size_t e = 0;
      for (size_t token = 0; token < n; ++token) {
        if (token >= sinks && token < sinks + count) continue;
        for (size_t h = 0; h < m.kv_heads; ++h)
          for (size_t j = 0; j < m.dim; ++j) {
            const size_t at = ((b * m.kv_heads + h) * capacity + e) * m.dim + j;
            exact_keys[at] = float_to_half(m.keys[b][token * row + h * m.dim + j]);
            exact_values[at] = float_to_half(m.values[b][token * row + h * m.dim + j]);
          }
        ++e;
      }
    }
    pages = std::max<size_t>(pages, 1);
  }
};

inline std::vector<float> random_queries(size_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  std::normal_distribution<float> normal;
  std::vector<float> q(count);
  for (float& v : q) v = 1.5f * normal(random);
  return q;
}

// How far the kernels' lse may lie from the CPU's: the rotated query is an fp16 operand (2^-11
// relative per element), so a score's error grows with the score.
inline double lse_tolerance(double lse) { return 4e-3 + 1e-3 * std::abs(lse); }

// Relative L2 distance of two vectors.
inline double relative_error(const float* got, const float* expected, size_t n) {
  double difference = 0.0, norm = 0.0;
  for (size_t i = 0; i < n; ++i) {
    difference += std::pow(static_cast<double>(got[i]) - expected[i], 2);
    norm += std::pow(static_cast<double>(expected[i]), 2);
  }
  return std::sqrt(difference / std::max(norm, 1e-300));
}

// Random queries for every sequence and query head of a mirrored cache, and the cache's own decode
// of them (float arithmetic): what the kernels are compared with.
struct CpuDecode {
  std::vector<float> queries, output, lse;

  CpuDecode(const MirroredCache& m) : queries(random_queries(m.lengths.size() * m.q_heads * m.dim, 5)) {
    output.resize(queries.size());
    lse.resize(m.lengths.size() * m.q_heads);
    AttentionOptions exact_float;
    exact_float.arithmetic = Arithmetic::kFloat;
    m.cache.decode(0, m.ids.data(), m.lengths.size(), queries.data(), m.q_heads, output.data(), lse.data(),
                   exact_float);
  }

  // Expects a kernel's output and lse (`who` ran it) within fp16 operand rounding of the CPU's.
  void expect_close(const char* who, const std::string& policy, const MirroredCache& m, const std::vector<float>& got,
                    const std::vector<float>& got_lse) const {
    double worst = 0.0, worst_lse = 0.0;
    for (size_t row = 0; row < lse.size(); ++row) {
      worst = std::max(worst, relative_error(got.data() + row * m.dim, output.data() + row * m.dim, m.dim));
      worst_lse = std::max(worst_lse, std::abs(got_lse[row] - lse[row]) / lse_tolerance(lse[row]));
    }
    // fp16 operands of the tensor cores (the rotated query, centroids, weights): ~5e-4 each.
    EXPECT_LT(worst, 4e-3) << policy << " dim " << m.dim;
    EXPECT_LT(worst_lse, 1.0) << policy << " dim " << m.dim;
    std::printf("[ %-8s ] %s dim %zu q_heads %zu: output %.2e, lse %.2f of its tolerance from the CPU's\n", who,
                policy.c_str(), m.dim, m.q_heads, worst, worst_lse);
  }
};

struct DecodeCase {
  size_t kv_heads, dim, q_heads;
  std::string policy;
  size_t page;
};

}  // namespace kvsketch::cuda

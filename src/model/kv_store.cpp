#include "kvsketch/model/kv_store.hpp"

#include <algorithm>
#include <cmath>

#include "core/require.hpp"

namespace kvsketch::model {

CompressedKV::CompressedKV(PagedKVCache& cache, AttentionOptions options, ChunkAttention chunks)
    : CompressedKV(cache, cache.add_sequence(), options, chunks) {}

CompressedKV::CompressedKV(PagedKVCache& cache, SequenceId sequence, AttentionOptions options, ChunkAttention chunks)
    : cache_(cache), sequence_(sequence), options_(options), chunks_(chunks) {
  require(cache.contains(sequence), "CompressedKV: the cache has no sequence {}", sequence);
}

size_t CompressedKV::tokens() const { return cache_.tokens(sequence_, 0); }

namespace {

// A chunk's keys and values, [count][heads][dim] as the model makes them, into the caches' order,
// [heads][count][dim].
void to_head_major(const float* keys, const float* values, size_t count, size_t heads, size_t dim,
                   std::vector<float>& keys_out, std::vector<float>& values_out) {
  keys_out.resize(count * heads * dim);
  values_out.resize(keys_out.size());
  for (size_t t = 0; t < count; ++t)
    for (size_t h = 0; h < heads; ++h) {
      std::copy_n(keys + (t * heads + h) * dim, dim, keys_out.data() + (h * count + t) * dim);
      std::copy_n(values + (t * heads + h) * dim, dim, values_out.data() + (h * count + t) * dim);
    }
}

}  // namespace

void CompressedKV::append_and_attend(size_t layer, const float* keys, const float* values, size_t count,
                                     const float* queries, size_t q_heads, float* output) {
  to_head_major(keys, values, count, cache_.kv_heads(), cache_.head_dim(), keys_, values_);
  // A decode step has the bits of the cache's decode (and of append_and_attend_batch) either way.
  if (count == 1 || chunks_ == ChunkAttention::kThroughCache) {
    cache_.append(sequence_, layer, keys_.data(), values_.data(), count);
    cache_.prefill(layer, sequence_, count, queries, q_heads, output, nullptr, options_);
    return;
  }
  cache_.attend_chunk(layer, sequence_, count, queries, q_heads, keys_.data(), values_.data(), output, nullptr,
                      options_);
  cache_.append(sequence_, layer, keys_.data(), values_.data(), count);
}

size_t CompressedKV::bytes() const { return cache_.sequence_bytes(sequence_); }

void CompressedKV::append_and_attend_batch(CompressedKV* const* stores, size_t batch, size_t layer, const float* keys,
                                           const float* values, const float* queries, size_t q_heads, float* output) {
  if (batch == 0) return;
  PagedKVCache& cache = stores[0]->cache_;
  const size_t row = cache.kv_heads() * cache.head_dim();
  std::vector<SequenceId> ids(batch);
  for (size_t b = 0; b < batch; ++b) {
    require(&stores[b]->cache_ == &cache, "append_and_attend_batch: store {} holds a sequence of another cache", b);
    ids[b] = stores[b]->sequence_;
  }
  // One token's [kv_heads][head_dim] is the cache's [kv_heads][1][head_dim]: appended as it is.
  for (size_t b = 0; b < batch; ++b) cache.append(ids[b], layer, keys + b * row, values + b * row, 1);
  cache.decode(layer, ids.data(), batch, queries, q_heads, output, nullptr, stores[0]->options_);
}

SelectedKV::SelectedKV(PagedSelectionCache& cache, ChunkAttention chunks)
    : cache_(cache), sequence_(cache.add_sequence()), chunks_(chunks) {}

size_t SelectedKV::tokens() const { return cache_.cache().tokens(sequence_, 0); }

void SelectedKV::append_and_attend(size_t layer, const float* keys, const float* values, size_t count,
                                   const float* queries, size_t q_heads, float* output) {
  const PagedKVCache& cache = cache_.cache();
  to_head_major(keys, values, count, cache.kv_heads(), cache.head_dim(), keys_, values_);
  const size_t position = cache.tokens(sequence_, layer);
  if (count == 1) {
    cache_.append(sequence_, layer, keys_.data(), values_.data(), count);
    cache_.attention(layer, &sequence_, 1, queries, q_heads, output, nullptr, position);
  } else if (chunks_ == ChunkAttention::kExactChunk) {
    cache.attend_chunk(layer, sequence_, count, queries, q_heads, keys_.data(), values_.data(), output, nullptr);
    cache_.append(sequence_, layer, keys_.data(), values_.data(), count);
  } else {
    cache_.append(sequence_, layer, keys_.data(), values_.data(), count);
    cache.prefill(layer, sequence_, count, queries, q_heads, output, nullptr);
  }
}

size_t SelectedKV::bytes() const {
  return cache_.cache().sequence_bytes(sequence_) + cache_.index_bytes(sequence_);
}

ExactKV::ExactKV(size_t layers, size_t kv_heads, size_t head_dim)
    : kv_heads_(kv_heads), head_dim_(head_dim), keys_(layers), values_(layers) {}

size_t ExactKV::tokens() const { return keys_.front().size() / (kv_heads_ * head_dim_); }

void ExactKV::append_and_attend(size_t layer, const float* keys, const float* values, size_t count,
                                const float* queries, size_t q_heads, float* output) {
  const size_t row = kv_heads_ * head_dim_, first = keys_[layer].size() / row, group = q_heads / kv_heads_;
  keys_[layer].insert(keys_[layer].end(), keys, keys + count * row);
  values_[layer].insert(values_[layer].end(), values, values + count * row);
  const float* k = keys_[layer].data();
  const float* v = values_[layer].data();
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim_));
#pragma omp parallel for collapse(2) schedule(static)
  for (size_t i = 0; i < count; ++i)
    for (size_t qh = 0; qh < q_heads; ++qh) {
      const size_t visible = first + i + 1, kh = qh / group;
      const float* q = queries + (i * q_heads + qh) * head_dim_;
      std::vector<float> scores(visible);
      float top = -INFINITY;
      for (size_t t = 0; t < visible; ++t) {
        float s = 0;
        for (size_t d = 0; d < head_dim_; ++d) s += q[d] * k[t * row + kh * head_dim_ + d];
        scores[t] = s * scale;
        top = std::max(top, scores[t]);
      }
      double total = 0;
      for (float& s : scores) total += (s = std::exp(s - top));
      float* out = output + (i * q_heads + qh) * head_dim_;
      std::fill_n(out, head_dim_, 0.0f);
      for (size_t t = 0; t < visible; ++t) {
        const float w = static_cast<float>(scores[t] / total);
        for (size_t d = 0; d < head_dim_; ++d) out[d] += w * v[t * row + kh * head_dim_ + d];
      }
    }
}

size_t ExactKV::bytes() const {
  size_t floats = 0;
  for (size_t l = 0; l < keys_.size(); ++l) floats += keys_[l].size() + values_[l].size();
  return floats * sizeof(float);
}

}  // namespace kvsketch::model

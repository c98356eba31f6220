#include "kvsketch/model/language_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/require.hpp"
#include "model/linear.hpp"
#include "model/model_weights.hpp"
#include "model/rope.hpp"

namespace kvsketch::model {
namespace {

// x * rsqrt(mean(x^2) + eps) * weight over each row of `dim`, as transformers' RMSNorm in float32.
void rms_norm(const float* x, size_t rows, size_t dim, const float* weight, double eps, float* y) {
  for (size_t r = 0; r < rows; ++r) {
    const float* in = x + r * dim;
    float* out = y + r * dim;
    float sum = 0;
    for (size_t i = 0; i < dim; ++i) sum += in[i] * in[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + static_cast<float>(eps));
    for (size_t i = 0; i < dim; ++i) out[i] = weight[i] * (in[i] * scale);
  }
}

const float* or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

// Weights that are finite can still overflow float32 on the way (a crafted or corrupted file):
// such a forward pass is refused rather than giving NaN logits.
void require_finite(const std::vector<float>& values, size_t width, const char* where, size_t layer) {
  for (size_t i = 0; i < values.size(); ++i)
    require(std::isfinite(values[i]), "forward: {} {} gives {} at token {} of the chunk (weights too large for "
            "float32?)", where, layer, values[i], i / width);
}

}  // namespace

struct LanguageModel::State {
  ModelConfig config;
  ModelWeights weights;
  Rope rope;
};

LanguageModel::LanguageModel(std::unique_ptr<State> state) : state_(std::move(state)) {}
LanguageModel::~LanguageModel() = default;
LanguageModel::LanguageModel(LanguageModel&&) noexcept = default;
LanguageModel& LanguageModel::operator=(LanguageModel&&) noexcept = default;

LanguageModel LanguageModel::load(const std::string& model_dir) {
  ModelConfig config = ModelConfig::load(model_dir);
  ModelWeights weights = ModelWeights::load(model_dir, config);
  Rope rope(config.rope, config.head_dim);
  return LanguageModel(std::make_unique<State>(State{std::move(config), std::move(weights), std::move(rope)}));
}

const ModelConfig& LanguageModel::config() const { return state_->config; }
size_t LanguageModel::weight_bytes() const { return state_->weights.bytes(); }

PagedKVCache LanguageModel::make_cache(const KVPolicy& policy, uint64_t seed) const {
  const ModelConfig& c = state_->config;
  return PagedKVCache(c.layers, c.kv_heads, c.head_dim, policy, seed);
}

namespace {

// Refuses token ids outside the vocabulary, naming the id and where it is.
void check_tokens(const ModelConfig& c, const int32_t* tokens, size_t count, const char* operation) {
  for (size_t i = 0; i < count; ++i)
    require(tokens[i] >= 0 && static_cast<size_t>(tokens[i]) < c.vocab_size,
            "{}: token {} (at {}) is outside the vocabulary of {}", operation, tokens[i], i, c.vocab_size);
}

// Refuses positions up to `last` where the config's sliding window would apply.
void check_window(const ModelConfig& c, size_t last) {
  if (c.sliding_window)
    require(last < *c.sliding_window,
            "forward: position {} is beyond the sliding window of {} tokens, which the runtime does not implement",
            last, *c.sliding_window);
}

}  // namespace

// The decoder over `count` rows of tokens, row i at position positions[i], attention through
// attend(layer, keys, values, queries, output) (rows of [kv_heads][head_dim] and [q_heads][head_dim]
// each); writes the logits of the last `logit_rows` rows.
struct LanguageModel::Decoder {
  template <typename Attend>
  static void run(const State& s, const int32_t* tokens, size_t count, const size_t* positions, Attend&& attend,
                  float* logits, size_t logit_rows) {
    const ModelConfig& c = s.config;
    const ModelWeights& w = s.weights;
    const size_t h = c.hidden_size, d = c.head_dim, qd = c.q_heads * d, kvd = c.kv_heads * d,
                 f = c.intermediate_size;
    std::vector<float> x(count * h), normed(count * h), q(count * qd), k(count * kvd), v(count * kvd),
        attended(count * qd), projected(count * h), gate(count * f), up(count * f);
    for (size_t i = 0; i < count; ++i)
      std::copy_n(w.embedding.data() + static_cast<size_t>(tokens[i]) * h, h, x.data() + i * h);

    for (size_t layer = 0; layer < c.layers; ++layer) {
      const LayerWeights& l = w.layers[layer];
      rms_norm(x.data(), count, h, l.attention_norm.data(), c.rms_norm_eps, normed.data());
      linear(normed.data(), count, h, l.q.data(), qd, or_null(l.q_bias), q.data());
      linear(normed.data(), count, h, l.k.data(), kvd, or_null(l.k_bias), k.data());
      linear(normed.data(), count, h, l.v.data(), kvd, or_null(l.v_bias), v.data());
      if (c.qk_norm) {  // each head normalized on its own, before RoPE (in place: a row is read before written)
        rms_norm(q.data(), count * c.q_heads, d, l.q_norm.data(), c.rms_norm_eps, q.data());
        rms_norm(k.data(), count * c.kv_heads, d, l.k_norm.data(), c.rms_norm_eps, k.data());
      }
      for (size_t i = 0; i < count; ++i) {
        s.rope.apply(q.data() + i * qd, c.q_heads, positions[i]);
        s.rope.apply(k.data() + i * kvd, c.kv_heads, positions[i]);
      }
      attend(layer, k.data(), v.data(), q.data(), attended.data());
      linear(attended.data(), count, qd, l.o.data(), h, or_null(l.o_bias), projected.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += projected[i];

      rms_norm(x.data(), count, h, l.post_attention_norm.data(), c.rms_norm_eps, normed.data());
      linear(normed.data(), count, h, l.gate.data(), f, or_null(l.gate_bias), gate.data());
      linear(normed.data(), count, h, l.up.data(), f, or_null(l.up_bias), up.data());
      for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
      linear(gate.data(), count, f, l.down.data(), h, or_null(l.down_bias), projected.data());
      for (size_t i = 0; i < x.size(); ++i) x[i] += projected[i];
      require_finite(x, h, "layer", layer);
    }
    if (logit_rows == 0) return;
    const size_t from = count - logit_rows;
    rms_norm(x.data() + from * h, logit_rows, h, w.final_norm.data(), c.rms_norm_eps, normed.data());
    linear(normed.data(), logit_rows, h, w.output_matrix().data(), c.vocab_size, nullptr, logits);
    for (size_t i = 0; i < logit_rows * c.vocab_size; ++i)
      require(std::isfinite(logits[i]),
              "forward: the output layer gives {} at token {} (weights too large for float32?)", logits[i],
              from + i / c.vocab_size);
  }
};

void LanguageModel::forward(KVStore& kv, const int32_t* tokens, size_t count, float* logits,
                            size_t logit_rows) const {
  const ModelConfig& c = state_->config;
  require(count > 0 && tokens != nullptr, "forward: no tokens given");
  require(logit_rows <= count, "forward: {} logit rows asked of a chunk of {} tokens", logit_rows, count);
  require(logit_rows == 0 || logits != nullptr, "forward: logits is null");
  check_tokens(c, tokens, count, "forward");
  const size_t first = kv.tokens();
  check_window(c, first + count - 1);
  std::vector<size_t> positions(count);
  for (size_t i = 0; i < count; ++i) positions[i] = first + i;
  Decoder::run(
      *state_, tokens, count, positions.data(),
      [&](size_t layer, const float* k, const float* v, const float* q, float* out) {
        kv.append_and_attend(layer, k, v, count, q, c.q_heads, out);
      },
      logits, logit_rows);
}

void LanguageModel::forward_batch(KVStore* const* sequences, const int32_t* tokens, size_t batch,
                                  float* logits) const {
  const ModelConfig& c = state_->config;
  if (batch == 0) return;
  require(sequences != nullptr && tokens != nullptr && logits != nullptr, "forward_batch: null sequences, tokens or logits");
  check_tokens(c, tokens, batch, "forward_batch");
  std::vector<size_t> positions(batch);
  std::vector<CompressedKV*> compressed(batch);
  bool one_cache = true;
  for (size_t b = 0; b < batch; ++b) {
    require(sequences[b] != nullptr, "forward_batch: sequence {} is null", b);
    for (size_t other = 0; other < b; ++other)
      require(sequences[other] != sequences[b], "forward_batch: rows {} and {} are the same sequence", other, b);
    positions[b] = sequences[b]->tokens();
    check_window(c, positions[b]);
    compressed[b] = dynamic_cast<CompressedKV*>(sequences[b]);
    one_cache = one_cache && compressed[b] && &compressed[b]->cache() == &compressed[0]->cache();
  }
  const size_t qd = c.q_heads * c.head_dim, kvd = c.kv_heads * c.head_dim;
  Decoder::run(
      *state_, tokens, batch, positions.data(),
      [&](size_t layer, const float* k, const float* v, const float* q, float* out) {
        if (one_cache)
          return CompressedKV::append_and_attend_batch(compressed.data(), batch, layer, k, v, q, c.q_heads, out);
        for (size_t b = 0; b < batch; ++b)
          sequences[b]->append_and_attend(layer, k + b * kvd, v + b * kvd, 1, q + b * qd, c.q_heads, out + b * qd);
      },
      logits, batch);
}

}  // namespace kvsketch::model

// The model runtime against transformers: tiny random models of every supported family, dtype,
// RoPE rule and checkpoint layout (tests/data/models, made by training/golden_fixtures.py) give
// transformers' float32 logits at every position, through exact attention in any chunking, and
// close to them through kvsketch's fp16 cache. Bad folders are refused naming the problem.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvsketch/model/language_model.hpp"
#include "model/policy_store.hpp"
#include "model/safetensors_file.hpp"
#include "test_util.hpp"

namespace kvsketch::model {
namespace {

namespace fs = std::filesystem;

const std::string kModels = std::string(KVSKETCH_TEST_DATA_DIR) + "/models/";
const char* kFixtures[] = {"llama_f32", "llama3_scaled_bf16_sharded", "llama_linear_rope_f16", "qwen2_f16",
                           "mistral_f32", "qwen3_bf16"};

struct Golden {
  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::vector<float>> logits;  // [tokens][vocab] per prompt
};

Golden read_golden(const std::string& folder) {
  SafetensorsFile file(folder + "/golden.safetensors");
  Golden g;
  for (size_t i = 0; file.contains("prompt" + std::to_string(i) + ".ids"); ++i) {
    const auto ids = file.read_floats("prompt" + std::to_string(i) + ".ids");
    g.prompts.emplace_back(ids.begin(), ids.end());
    g.logits.push_back(file.read_floats("prompt" + std::to_string(i) + ".logits"));
  }
  return g;
}

// Logits of every position of `prompt`, fed in chunks of `chunk` tokens.
std::vector<float> run(const LanguageModel& model, KVStore& kv, const std::vector<int32_t>& prompt, size_t chunk) {
  const size_t vocab = model.config().vocab_size;
  std::vector<float> logits(prompt.size() * vocab);
  for (size_t at = 0; at < prompt.size(); at += chunk) {
    const size_t n = std::min(chunk, prompt.size() - at);
    model.forward(kv, prompt.data() + at, n, logits.data() + at * vocab, n);
  }
  return logits;
}

double max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
  return worst;
}

double max_abs(const std::vector<float>& a) {
  double m = 0;
  for (float v : a) m = std::max(m, std::abs(double(v)));
  return m;
}

class GoldenLogits : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenLogits, ExactAttentionMatchesTransformersInAnyChunking) {
  const std::string folder = kModels + GetParam();
  const LanguageModel model = LanguageModel::load(folder);
  const Golden golden = read_golden(folder);
  ASSERT_GE(golden.prompts.size(), 2u);
  for (size_t p = 0; p < golden.prompts.size(); ++p)
    for (size_t chunk : {size_t{1}, size_t{7}, golden.prompts[p].size()}) {
      ExactKV kv(model.config().layers, model.config().kv_heads, model.config().head_dim);
      const auto logits = run(model, kv, golden.prompts[p], chunk);
      ASSERT_GT(max_abs(golden.logits[p]), 0.5) << "logits too small to test anything";
      const double difference = max_abs_difference(logits, golden.logits[p]);
      if (chunk == 7) std::printf("%s prompt %zu: max abs difference %.2e\n", GetParam(), p, difference);
      EXPECT_LE(difference, 1e-3) << GetParam() << " prompt " << p << " chunk " << chunk;
    }
}

TEST_P(GoldenLogits, Fp16CacheStaysCloseAndCompressedCachesDrift) {
  const std::string folder = kModels + GetParam();
  const LanguageModel model = LanguageModel::load(folder);
  const Golden golden = read_golden(folder);
  const auto& prompt = golden.prompts[1];
  // A short window and block, so that most tokens go through the cache's body.
  double fp16_error = 0, tq2_error = 0;
  for (const char* spec : {"fp16|sinks=2|window=8|block=4", "tq_mse:b=2|sinks=2|window=8|block=4"}) {
    PagedKVCache cache = model.make_cache(KVPolicy::parse(spec), 1);
    CompressedKV kv(cache);
    const double error = max_abs_difference(run(model, kv, prompt, 5), golden.logits[1]);
    (spec[0] == 'f' ? fp16_error : tq2_error) = error;
    EXPECT_EQ(kv.tokens(), prompt.size());
    EXPECT_EQ(kv.bytes(), cache.bytes() - cache.calibration().bytes());
  }
  std::printf("%s: fp16 cache %.2e, tq_mse:b=2 cache %.2e\n", GetParam(), fp16_error, tq2_error);
  EXPECT_LE(fp16_error, 2e-2) << GetParam();
  EXPECT_GT(tq2_error, 4 * fp16_error) << GetParam() << ": a 2-bit cache should move the logits";
}

// A prompt in one chunk reads no codes (ChunkAttention::kExactChunk, as engines prefill): a 2-bit
// cache gives the fp16 cache's logits to the bit, and both stay at transformers'. Read back
// through the cache (kThroughCache, as llama.cpp) the chunk's early queries read codes; split in
// chunks, the later chunks read the earlier ones' codes either way.
TEST_P(GoldenLogits, AChunkAttendsItselfExactlyBeforeItIsAppended) {
  const std::string folder = kModels + GetParam();
  const LanguageModel model = LanguageModel::load(folder);
  const Golden golden = read_golden(folder);
  const auto& prompt = golden.prompts[1];
  const auto logits = [&](const char* spec, ChunkAttention chunks, size_t chunk) {
    PagedKVCache cache = model.make_cache(KVPolicy::parse(spec), 1);
    CompressedKV kv(cache, AttentionOptions{}, chunks);
    auto out = run(model, kv, prompt, chunk);
    EXPECT_EQ(kv.tokens(), prompt.size());
    return out;
  };
  const char *fp16 = "fp16|sinks=2|window=8|block=4", *tq2 = "tq_mse:b=2|sinks=2|window=8|block=4";
  const auto exact = ChunkAttention::kExactChunk, through = ChunkAttention::kThroughCache;
  const auto fp16_whole = logits(fp16, exact, prompt.size());
  EXPECT_EQ(fp16_whole, logits(tq2, exact, prompt.size()));
  EXPECT_LE(max_abs_difference(fp16_whole, golden.logits[1]), 2e-2);
  const double through_error = max_abs_difference(logits(tq2, through, prompt.size()), fp16_whole);
  const double chunked_error = max_abs_difference(logits(tq2, exact, 5), fp16_whole);
  std::printf("%s: read back %.3f, in chunks of 5 %.3f\n", GetParam(), through_error, chunked_error);
  EXPECT_GT(through_error, 0.05);
  EXPECT_GT(chunked_error, 0.05);
}

INSTANTIATE_TEST_SUITE_P(Families, GoldenLogits, ::testing::ValuesIn(kFixtures));

// A decode step for a batch runs the projections over all rows and the attention of a cache's
// sequences in one call: each row's logits are those of its sequence decoded alone (up to the
// matrix product's rounding), whatever stores the rows hold.
TEST(ModelRuntimeBatch, ABatchStepGivesEachSequenceItsOwnLogits) {
  const std::string folder = kModels + "llama_f32";
  const LanguageModel model = LanguageModel::load(folder);
  const Golden golden = read_golden(folder);
  const size_t vocab = model.config().vocab_size;
  const auto& long_prompt = golden.prompts[1];
  const std::vector<std::vector<int32_t>> prompts{
      long_prompt, {long_prompt.begin(), long_prompt.begin() + 9}, {long_prompt.begin() + 3, long_prompt.end()}};
  const KVPolicy policy = KVPolicy::parse("tq_mse:b=3|sinks=2|window=8|block=4");
  PagedKVCache batched_cache = model.make_cache(policy, 5), alone_cache = model.make_cache(policy, 5);
  std::vector<CompressedKV> batched, alone;
  ExactKV exact(model.config().layers, model.config().kv_heads, model.config().head_dim);
  ExactKV exact_alone(model.config().layers, model.config().kv_heads, model.config().head_dim);
  for (const auto& prompt : prompts) {
    batched.emplace_back(batched_cache);
    alone.emplace_back(alone_cache);
    model.forward(batched.back(), prompt.data(), prompt.size(), nullptr, 0);
    model.forward(alone.back(), prompt.data(), prompt.size(), nullptr, 0);
  }
  model.forward(exact, prompts[1].data(), prompts[1].size(), nullptr, 0);
  model.forward(exact_alone, prompts[1].data(), prompts[1].size(), nullptr, 0);
  std::vector<int32_t> next{5, 17, 250};
  double worst = 0, scale = 0;
  for (int step = 0; step < 4; ++step) {
    // One cache's sequences (one batched decode call), and a batch mixing stores (one by one).
    std::vector<KVStore*> rows{&batched[0], &batched[1], &batched[2]};
    std::vector<float> logits(3 * vocab), mixed(2 * vocab), want(vocab);
    model.forward_batch(rows.data(), next.data(), 3, logits.data());
    std::vector<KVStore*> mixed_rows{&exact, &alone[2]};
    const int32_t mixed_tokens[2] = {next[1], next[2]};
    model.forward_batch(mixed_rows.data(), mixed_tokens, 2, mixed.data());
    for (size_t b = 0; b < 3; ++b) {
      if (b < 2) model.forward(alone[b], &next[b], 1, want.data(), 1);
      else std::copy(mixed.begin() + vocab, mixed.end(), want.begin());
      for (size_t i = 0; i < vocab; ++i) {
        worst = std::max(worst, std::abs(double(logits[b * vocab + i]) - want[i]));
        scale = std::max(scale, std::abs(double(want[i])));
      }
    }
    model.forward(exact_alone, &next[1], 1, want.data(), 1);
    for (size_t i = 0; i < vocab; ++i) worst = std::max(worst, std::abs(double(mixed[i]) - want[i]));
    for (size_t b = 0; b < 3; ++b)
      next[b] = static_cast<int32_t>(std::max_element(logits.begin() + b * vocab, logits.begin() + (b + 1) * vocab) -
                                     (logits.begin() + b * vocab));
  }
  std::printf("batch step: max abs logit difference to single steps %.2e (logits up to %.2f)\n", worst, scale);
  EXPECT_GT(scale, 0.5);
  EXPECT_LE(worst, 1e-4);
  for (size_t b = 0; b < 3; ++b) EXPECT_EQ(batched[b].tokens(), prompts[b].size() + 4);
  // Refusals come before anything is appended.
  std::vector<KVStore*> twice{&batched[0], &batched[0]};
  std::vector<float> logits(2 * vocab);
  const int32_t tokens[2] = {1, 2}, outside[2] = {1, 100000};
  EXPECT_NE(testutil::error_of([&] { model.forward_batch(twice.data(), tokens, 2, logits.data()); })
                .find("same sequence"),
            std::string::npos);
  std::vector<KVStore*> two{&batched[0], &batched[1]};
  EXPECT_NE(testutil::error_of([&] { model.forward_batch(two.data(), outside, 2, logits.data()); })
                .find("outside the vocabulary"),
            std::string::npos);
  EXPECT_EQ(batched[0].tokens(), prompts[0].size() + 4);
}

// A policy with select= decodes token by token through the selectors and prefills densely: every
// body token selected gives the fp16 cache's logits, a prompt chunk gives them whatever the
// selector, and MagicPIG's samples move the decoded logits a little and cost their index's bytes.
TEST(ModelRuntimeSelection, PromptsPrefillDenselyAndDecodeStepsGoThroughTheSelectors) {
  const std::string folder = kModels + "llama_f32";
  const LanguageModel model = LanguageModel::load(folder);
  const Golden golden = read_golden(folder);
  const auto& prompt = golden.prompts[1];
  ASSERT_GE(prompt.size(), 20u);
  const std::string cache = "fp16|sinks=2|window=8|block=4";
  const auto logits_of = [&](const std::string& policy, size_t chunk) {
    PolicyStore store(model, policy, 3);
    auto logits = run(model, store.kv(), prompt, chunk);
    return std::make_pair(std::move(logits), store.bits_per_value());
  };
  const auto [dense, dense_bits] = logits_of(cache, 1);
  const auto [everything, everything_bits] = logits_of(cache + "|select=topk:budget=1", 1);
  EXPECT_LE(max_abs_difference(everything, dense), 1e-4);
  EXPECT_EQ(everything_bits, dense_bits);
  const auto [prefilled, prefilled_bits] = logits_of(cache + "|select=magicpig:K=2,L=100", prompt.size());
  EXPECT_EQ(prefilled, logits_of(cache, prompt.size()).first);  // the same prefill kernels, the same bits
  const auto [sampled, sampled_bits] = logits_of(cache + "|select=magicpig:K=2,L=100", 1);
  const double moved = max_abs_difference(sampled, dense);
  std::printf("magicpig decode: max abs logit difference %.3e, %.2f bits per value (fp16 cache %.2f)\n", moved,
              sampled_bits, dense_bits);
  EXPECT_GT(moved, 1e-6);
  EXPECT_LT(moved, 0.5 * max_abs(dense));
  EXPECT_GT(sampled_bits, dense_bits);  // the index is counted
  const auto [one_dense_layer, unused] = logits_of(cache + "|select=magicpig:K=2,L=100|dense=0,1", 1);
  EXPECT_LE(max_abs_difference(one_dense_layer, dense), 1e-4);  // every layer dense: the cache's decode
  (void)unused;
  EXPECT_TRUE(policy_is_randomized(cache + "|select=magicpig:K=2,L=100", 16));
  EXPECT_FALSE(policy_is_randomized(cache + "|select=topk:budget=0.5", 16));
  const auto error = [&](const std::string& policy) { return testutil::error_of([&] { PolicyStore(model, policy, 0); }); };
  EXPECT_NE(error(cache + "|select=").find("names no selector"), std::string::npos);
  EXPECT_NE(error(cache + "|dense=1").find("needs select="), std::string::npos);
  EXPECT_NE(error(cache + "|select=exact|dense=a").find("layer numbers"), std::string::npos);
  EXPECT_NE(error(cache + "|select=exact|dense=5").find("dense layer 5"), std::string::npos);
  EXPECT_NE(error(cache + "|select=exact|select=exact").find("twice"), std::string::npos);
  EXPECT_NE(error(cache + "|select=magicpig:K=0").find("K"), std::string::npos);
}



// A copy of a fixture in a scratch folder, for breaking.
struct ScratchModel {
  fs::path dir;
  explicit ScratchModel(const char* fixture) {
    dir = fs::temp_directory_path() / ("kvsketch_model_" + std::to_string(::getpid()) + "_" + fixture);
    fs::remove_all(dir);
    fs::copy(kModels + fixture, dir, fs::copy_options::recursive);
  }
  ~ScratchModel() { fs::remove_all(dir); }
  std::string text(const char* name) const {
    std::ifstream in(dir / name, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  void write(const char* name, const std::string& bytes) const {
    std::ofstream(dir / name, std::ios::binary | std::ios::trunc) << bytes;
  }
  void replace(const char* name, const std::string& from, const std::string& to) const {
    std::string t = text(name);
    const size_t at = t.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    write(name, t.replace(at, from.size(), to));
  }
  std::string load_error() const {
    return testutil::error_of([&] { LanguageModel::load(dir.string()); });
  }
};

TEST(ModelRuntimeBadInput, ConfigProblemsAreNamed) {
  ScratchModel m("llama_f32");
  m.replace("config.json", "\"LlamaForCausalLM\"", "\"GPT2LMHeadModel\"");
  EXPECT_NE(m.load_error().find("architecture 'GPT2LMHeadModel' is not supported"), std::string::npos) << m.load_error();
  ScratchModel n("llama_f32");
  n.replace("config.json", "\"num_hidden_layers\"", "\"num_layers_renamed\"");
  EXPECT_NE(n.load_error().find("missing field 'num_hidden_layers'"), std::string::npos) << n.load_error();
  ScratchModel g("llama_f32");
  g.replace("config.json", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3");
  EXPECT_NE(g.load_error().find("not a multiple of num_key_value_heads 3"), std::string::npos) << g.load_error();
  ScratchModel r("llama_linear_rope_f16");
  r.replace("config.json", "\"linear\"", "\"yarn\"");
  EXPECT_NE(r.load_error().find("'rope_scaling.rope_type' is 'yarn' but 'rope_scaling.type' is 'linear'"),
            std::string::npos) << r.load_error();
  r.replace("config.json", "\"linear\"", "\"yarn\"");
  EXPECT_NE(r.load_error().find("RoPE type 'yarn' is not supported"), std::string::npos) << r.load_error();
  ScratchModel j("llama_f32");
  j.write("config.json", "{\"architectures\": [\"LlamaForCausalLM\"], ");
  EXPECT_NE(j.load_error().find("not valid JSON"), std::string::npos) << j.load_error();
  ScratchModel s("mistral_f32");
  s.replace("config.json", "\"sliding_window\": null", "\"sliding_window\": 0");
  EXPECT_NE(s.load_error().find("'sliding_window' is 0"), std::string::npos) << s.load_error();
  ScratchModel layers("qwen3_bf16");
  layers.replace("config.json", "\"full_attention\"\n  ]", "\"full_attention\",\n    \"full_attention\"\n  ]");
  EXPECT_NE(layers.load_error().find("expected a list of 2 layer types, one per layer"), std::string::npos)
      << layers.load_error();
  ScratchModel chunked("qwen3_bf16");
  chunked.replace("config.json", "\"full_attention\"\n  ]", "\"chunked_attention\"\n  ]");
  EXPECT_NE(chunked.load_error().find("layer type \"chunked_attention\" is not supported"), std::string::npos)
      << chunked.load_error();
}

// Sliding layers (Qwen's use_sliding_window, or a sliding entry in layer_types) limit the positions
// the runtime accepts to the window, since it attends every layer fully.
TEST(ModelRuntimeBadInput, PositionsBeyondASlidingLayerAreRefused) {
  ScratchModel m("qwen3_bf16");
  m.replace("config.json", "\"sliding_window\": null", "\"sliding_window\": 16");
  m.replace("config.json", "\"full_attention\"\n  ]", "\"sliding_attention\"\n  ]");
  const LanguageModel model = LanguageModel::load(m.dir.string());
  ASSERT_EQ(model.config().sliding_window, std::optional<size_t>(16));
  ExactKV kv(model.config().layers, model.config().kv_heads, model.config().head_dim);
  const std::vector<int32_t> prompt(20, 3);
  std::vector<float> logits(model.config().vocab_size);
  const std::string error = testutil::error_of([&] { model.forward(kv, prompt.data(), prompt.size(), logits.data(), 1); });
  EXPECT_NE(error.find("beyond the sliding window of 16 tokens"), std::string::npos) << error;
}

TEST(ModelRuntimeBadInput, WeightProblemsAreNamed) {
  ScratchModel shape("llama_f32");
  shape.replace("config.json", "\"intermediate_size\": 160", "\"intermediate_size\": 161");
  EXPECT_NE(shape.load_error().find("tensor 'model.layers.0.mlp.gate_proj.weight' has shape [160, 64]; the config "
                                    "implies [161, 64]"),
            std::string::npos)
      << shape.load_error();
  ScratchModel truncated("llama_f32");
  const std::string bytes = truncated.text("model.safetensors");
  truncated.write("model.safetensors", bytes.substr(0, bytes.size() - 100));
  EXPECT_NE(truncated.load_error().find("file truncated?"), std::string::npos) << truncated.load_error();
  truncated.write("model.safetensors", bytes.substr(0, 5));
  EXPECT_NE(truncated.load_error().find("not a .safetensors file"), std::string::npos) << truncated.load_error();
  ScratchModel header("llama_f32");
  header.write("model.safetensors", std::string("\xff\xff\xff\xff\xff\xff\x00\x00", 8) + bytes.substr(8));
  EXPECT_NE(header.load_error().find("runs past the end of the file"), std::string::npos) << header.load_error();
  ScratchModel missing("llama_f32");
  missing.replace("config.json", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": false, \"mlp_bias\": true");
  EXPECT_NE(missing.load_error().find("no tensor 'model.layers.0.mlp.gate_proj.bias'"), std::string::npos)
      << missing.load_error();
  ScratchModel shard("llama3_scaled_bf16_sharded");
  fs::remove(shard.dir / "model-00002-of-00004.safetensors");
  EXPECT_NE(shard.load_error().find("cannot open"), std::string::npos) << shard.load_error();
  ScratchModel norm("qwen2_f16");  // Qwen2's weights, which have no per-head norms
  norm.replace("config.json", "\"Qwen2ForCausalLM\"", "\"Qwen3ForCausalLM\"");
  EXPECT_NE(norm.load_error().find("no tensor 'model.layers.0.self_attn.q_norm.weight'"), std::string::npos)
      << norm.load_error();
  ScratchModel none("llama_f32");
  fs::remove(none.dir / "model.safetensors");
  EXPECT_NE(none.load_error().find("neither model.safetensors nor"), std::string::npos) << none.load_error();
}

TEST(ModelRuntimeBadInput, NonFiniteWeightsAreRefused) {
  ScratchModel m("llama_f32");
  std::string bytes = m.text("model.safetensors");
  uint64_t header;
  std::memcpy(&header, bytes.data(), 8);
  const float nan = NAN;
  std::memcpy(bytes.data() + bytes.size() - 4, &nan, 4);  // the last element of the last tensor
  m.write("model.safetensors", bytes);
  EXPECT_NE(m.load_error().find("holds nan"), std::string::npos) << m.load_error();
}

TEST(ModelRuntimeBadInput, OverflowingActivationsAreRefused) {
  ScratchModel m("llama_f32");
  std::string bytes = m.text("model.safetensors");
  uint64_t header;
  std::memcpy(&header, bytes.data(), 8);
  const TensorInfo down = SafetensorsFile((m.dir / "model.safetensors").string()).info("model.layers.0.mlp.down_proj.weight");
  const float huge = 3e38f;
  for (size_t at = down.begin; at < down.end; at += 4) std::memcpy(bytes.data() + 8 + header + at, &huge, 4);
  m.write("model.safetensors", bytes);
  const LanguageModel model = LanguageModel::load(m.dir.string());  // finite weights load
  ExactKV kv(model.config().layers, model.config().kv_heads, model.config().head_dim);
  const int32_t tokens[] = {3, 4};
  std::vector<float> logits(2 * model.config().vocab_size);
  EXPECT_NE(testutil::error_of([&] { model.forward(kv, tokens, 2, logits.data(), 2); }).find("forward: layer 0 gives"),
            std::string::npos);
}

TEST(ModelRuntimeBadInput, TokensOutsideTheVocabularyAreRefusedBeforeAppending) {
  const LanguageModel model = LanguageModel::load(kModels + "llama_f32");
  ExactKV kv(model.config().layers, model.config().kv_heads, model.config().head_dim);
  const int32_t tokens[] = {3, 320};
  std::vector<float> logits(2 * model.config().vocab_size);
  EXPECT_NE(testutil::error_of([&] { model.forward(kv, tokens, 2, logits.data(), 2); })
                .find("token 320 (at 1) is outside the vocabulary of 320"),
            std::string::npos);
  EXPECT_EQ(kv.tokens(), 0u);
  EXPECT_NE(testutil::error_of([&] { model.forward(kv, tokens, 1, logits.data(), 2); }).find("2 logit rows"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsketch::model

// The reference models (models/llama-reference and models/qwen2-reference, trained by
// training/train.py) through the runtime: their tokenizers and logits equal transformers' on the
// committed prompts, their perplexity equals transformers' on held-out text, KL divergence grows
// as a cache's bits fall, and retrieval prompts fill the context asked for. The commands refuse
// bad input naming it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "kvsketch/model/language_model.hpp"
#include "kvsketch/model/quality_eval.hpp"
#include "kvsketch/model/retrieval_eval.hpp"
#include "kvsketch/model/tokenizer.hpp"
#include "core/thread_scope.hpp"
#include "model/safetensors_file.hpp"
#include "test_util.hpp"

namespace kvsketch::model {
namespace {

const std::string kModel = std::string(KVSKETCH_MODELS_DIR) + "/llama-reference";
const std::string kText = std::string(KVSKETCH_DATA_DIR) + "/validation-text.txt";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(static_cast<bool>(in)) << path;
  return nlohmann::json::parse(in);
}

// Each committed reference model: a Llama (GQA, SentencePiece-style BPE) and a Qwen2 (q/k/v bias,
// one KV head, byte-level BPE).
class ReferenceModels : public ::testing::TestWithParam<const char*> {
 protected:
  std::string folder() const { return std::string(KVSKETCH_MODELS_DIR) + "/" + GetParam(); }
  // This model over `windows` windows of `context` tokens of the held-out text.
  PerplexityConfig perplexity_config(size_t context, size_t windows, size_t seeds) const {
    PerplexityConfig config;
    config.model_dir = folder();
    config.text_path = kText;
    config.context = context;
    config.windows = windows;
    config.seeds = seeds;
    return config;
  }
  // Thousands of decode steps, each a dozen small parallel regions: CTest runs two tests at once
  // on two cores, where one thread each is fastest (same bits: a GEMV output is one dot product).
  ThreadScope one_thread_{1};
};

TEST_P(ReferenceModels, TokenizerAndLogitsMatchTransformers) {
  const std::string model_dir = folder();
  const LanguageModel model = LanguageModel::load(model_dir);
  const Tokenizer tokenizer = Tokenizer::load(model_dir);
  const auto prompts = read_json(model_dir + "/golden_prompts.json");
  SafetensorsFile golden(model_dir + "/golden.safetensors");
  ASSERT_EQ(prompts.size(), 3u);
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto ids = tokenizer.encode(prompts[p].get<std::string>());
    const auto expected_ids = golden.read_floats("prompt" + std::to_string(p) + ".ids");
    ASSERT_EQ(std::vector<float>(ids.begin(), ids.end()), expected_ids) << "prompt " << p;
    const auto expected = golden.read_floats("prompt" + std::to_string(p) + ".logits");
    ExactKV kv(model.config().layers, model.config().kv_heads, model.config().head_dim);
    std::vector<float> logits(ids.size() * model.config().vocab_size);
    model.forward(kv, ids.data(), ids.size(), logits.data(), ids.size());
    double worst = 0;
    for (size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(double(logits[i]) - expected[i]));
    std::printf("%s prompt %zu: %zu tokens, max abs logit difference %.2e\n", GetParam(), p, ids.size(), worst);
    EXPECT_LE(worst, 1e-3) << "prompt " << p;
  }
}

TEST_P(ReferenceModels, PerplexityMatchesTransformersAndKldGrowsAsBitsFall) {
  const auto golden = read_json(folder() + "/golden_perplexity.json");
  PerplexityConfig config =
      perplexity_config(golden.at("context").get<size_t>(), golden.at("windows").get<size_t>(), 2);
  config.reference = "exact";
  config.policies = {"fp16", "q8_0", "q4_0", "tq_mse:b=2|tq_mse:b=2"};
  const PerplexityReport r = run_perplexity(config);
  EXPECT_EQ(r.scored_tokens, golden.at("tokens").get<size_t>());
  EXPECT_NEAR(r.reference_ppl, golden.at("ppl").get<double>(), 1e-4 * golden.at("ppl").get<double>());
  ASSERT_EQ(r.policies.size(), 4u);
  const auto& fp16 = r.policies[0].pooled;
  EXPECT_NEAR(fp16.ppl, r.reference_ppl, 2e-3 * r.reference_ppl);
  EXPECT_FALSE(r.policies[0].randomized);
  EXPECT_TRUE(r.policies[3].randomized);
  EXPECT_EQ(r.policies[3].kld_mean_per_seed.size(), 2u);
  double previous = 0;
  for (const auto& p : r.policies) {
    std::printf("%-24s %.2f bits/value  KLD %.6f ± %.6f  top-1 %.3f\n", p.policy.c_str(), p.bits_per_value,
                p.pooled.kld_mean, p.pooled.kld_stderr, p.pooled.top1_agreement);
    EXPECT_GT(p.pooled.kld_mean, previous) << p.policy << ": fewer bits should move the distribution more";
    previous = p.pooled.kld_mean + 2 * p.pooled.kld_stderr;
  }
  EXPECT_GT(r.policies[3].pooled.kld_mean, 10 * r.policies[1].pooled.kld_mean);
}

// docs/RESULTS.md's finding on both models: centred, rescaled TurboQuant codes move the model
// less than plain ones at the same bits (a third of the KLD at 4 bits), and less than q4_0 with
// fewer bytes.
TEST_P(ReferenceModels, CentredTurboQuantBeatsPlainAndQ4_0) {
  PerplexityConfig config = perplexity_config(512, 4, 2);
  config.policies = {"q4_0", "center:tq_mse:b=4,rescale=1|center:tq_mse:b=4,rescale=1", "tq_mse:b=4|tq_mse:b=4"};
  const PerplexityReport r = run_perplexity(config);
  ASSERT_EQ(r.policies.size(), 3u);
  for (const auto& p : r.policies)
    std::printf("%-58s %.2f bits/value  KLD %.6f ± %.6f\n", p.policy.c_str(), p.bits_per_value, p.pooled.kld_mean,
                p.pooled.kld_stderr);
  const auto& q4 = r.policies[0];
  const auto& centred4 = r.policies[1];
  const auto& plain4 = r.policies[2];
  EXPECT_LT(centred4.bits_per_value, q4.bits_per_value);
  EXPECT_LT(centred4.pooled.kld_mean + 2 * centred4.pooled.kld_stderr, q4.pooled.kld_mean);
  EXPECT_NEAR(centred4.bits_per_value, plain4.bits_per_value, 0.05);
  EXPECT_LT(centred4.pooled.kld_mean, 0.6 * plain4.pooled.kld_mean);
}

// Scored tokens are decode steps by default: each sees its recent tokens in the fp16 window.
// Prefilled in one chunk longer than the window, a query early in the chunk sees its neighbours
// compressed, which moves the model more; the fp16 cache gives the same perplexity either way.
TEST_P(ReferenceModels, ScoringDecodesTheScoredHalf) {
  PerplexityConfig config = perplexity_config(256, 4, 1);
  config.chunk = 256;
  config.policies = {"tq_mse:b=3|tq_mse:b=3|window=32"};
  const PerplexityReport decoded = run_perplexity(config);
  config.score_decode = false;
  const PerplexityReport prefilled = run_perplexity(config);
  EXPECT_TRUE(decoded.score_decode);
  EXPECT_FALSE(prefilled.score_decode);
  EXPECT_NEAR(decoded.reference_ppl, prefilled.reference_ppl, 1e-3 * prefilled.reference_ppl);
  const double d = decoded.policies[0].pooled.kld_mean, p = prefilled.policies[0].pooled.kld_mean;
  std::printf("KLD decoded %.5f, prefilled %.5f\n", d, p);
  EXPECT_GT(p, 1.5 * d);
}

INSTANTIATE_TEST_SUITE_P(Committed, ReferenceModels, ::testing::Values("llama-reference", "qwen2-reference"));

// The reference model learned retrieval (models/llama-reference/README.md): the fp16 cache and a
// 3-bit TurboQuant cache both find the pass key, and the prompts fill the context asked for.
TEST(ReferenceModel, PasskeyFoundThroughTheCache) {
  const ThreadScope one_thread(1);
  RetrievalConfig config;
  config.model_dir = kModel;
  config.text_path = kText;
  config.contexts = {512};
  config.depths = {0.1, 0.5, 0.9};
  config.samples = 4;
  config.policies = {"fp16", "tq_mse:b=3|tq_mse:b=3|window=32"};
  const RetrievalReport r = run_retrieval(config);
  ASSERT_EQ(r.policies.size(), 2u);
  for (const auto& p : r.policies) {
    std::printf("passkey at 512 tokens, %s: %.0f%%\n", p.policy.c_str(), 100 * p.accuracy);
    // 12 prompts: at most one miss (the fp16 cache and 3-bit codes find all 12 as committed).
    EXPECT_GE(p.accuracy, 11.0 / 12) << p.policy;
    ASSERT_EQ(p.cells.size(), 3u);
    for (const auto& c : p.cells) {
      EXPECT_EQ(c.total, 4u);
      // Prompts fill the context asked for, within the few tokens the fitting cannot control.
      EXPECT_LE(c.tokens, 512.0);
      EXPECT_GE(c.tokens, 0.9 * 512);
    }
  }
}

// Answers are scored on decode steps, which read the codes: an MQAR prompt (about 450 tokens at 32
// pairs) fits two prefill chunks that attend themselves exactly, so a prefill-scored answer would
// barely see the cache. Through 1-bit codes with a window of 8, MQAR falls far below fp16's (13%
// against 88%).
TEST(ReferenceModel, MqarAnswersReadTheCache) {
  const ThreadScope one_thread(1);
  RetrievalConfig config;
  config.model_dir = kModel;
  config.text_path = kText;
  config.task = RetrievalTask::kMqar;
  config.pairs = {32};
  config.samples = 4;
  config.policies = {"fp16", "tq_mse:b=1|tq_mse:b=1|window=8"};
  const RetrievalReport r = run_retrieval(config);
  ASSERT_EQ(r.policies.size(), 2u);
  for (const auto& p : r.policies) std::printf("mqar at 32 pairs, %s: %.1f%%\n", p.policy.c_str(), 100 * p.accuracy);
  EXPECT_EQ(r.policies[0].cells.at(0).total, 128u);
  EXPECT_GE(r.policies[0].accuracy, 0.8);
  EXPECT_LT(r.policies[1].accuracy, 0.4 * r.policies[0].accuracy);
}

TEST(ReferenceModelCommands, PerplexityJsonAndBadInput) {
  const auto [status, output] = testutil::run_tool("perplexity --model " + kModel + " --text " + kText +
                                                   " --policies 'q4_0|window=16;tq_mse:b=3|window=16' --context 128 --windows 1 "
                                                   "--seeds 2 "
                                                   "--json");
  ASSERT_EQ(status, 0) << output;
  const auto json = nlohmann::json::parse(output);
  EXPECT_EQ(json.at("policies").size(), 2u);
  EXPECT_EQ(json.at("policies")[1].at("seeds"), 2);
  EXPECT_GT(json.at("policies")[0].at("kld_mean").get<double>(), 0.0);
  EXPECT_EQ(json.at("scoring"), "decode");
  const auto bad_scoring = testutil::run_tool("perplexity --model " + kModel + " --text " + kText +
                                              " --policies fp16 --scoring batch");
  EXPECT_EQ(bad_scoring.first, 2);
  EXPECT_NE(bad_scoring.second.find("--scoring: batch not in {decode,prefill}"), std::string::npos)
      << bad_scoring.second;
  const auto bad_policy = testutil::run_tool("perplexity --model " + kModel + " --text " + kText + " --policies "
                                             "'tq_mse:b=3;tq_msee:b=3'");
  EXPECT_EQ(bad_policy.first, 2);
  EXPECT_NE(bad_policy.second.find("unknown codec 'tq_msee'"), std::string::npos) << bad_policy.second;
  const auto no_model = testutil::run_tool("perplexity --model /nonexistent --text " + kText + " --policies fp16");
  EXPECT_EQ(no_model.first, 2);
  EXPECT_NE(no_model.second.find("cannot open /nonexistent/config.json"), std::string::npos) << no_model.second;
  const auto short_text = testutil::run_tool("perplexity --model " + kModel + " --text " + kModel +
                                             "/config.json --policies fp16 --context 1024");
  EXPECT_EQ(short_text.first, 2);
  EXPECT_NE(short_text.second.find("fewer than one window of 1024"), std::string::npos) << short_text.second;
  const auto bad_task = testutil::run_tool("retrieval --model " + kModel + " --text " + kText +
                                           " --policies fp16 --task haystack");
  EXPECT_EQ(bad_task.first, 2);
  EXPECT_NE(bad_task.second.find("'haystack' is not passkey, needles or mqar"), std::string::npos);
  const auto bad_contexts = testutil::run_tool("bench decode --model " + kModel + " --text " + kText +
                                               " --contexts 1k,x2");
  EXPECT_EQ(bad_contexts.first, 2);
  EXPECT_NE(bad_contexts.second.find("'x2' is not a token count"), std::string::npos) << bad_contexts.second;
}

// A batch of sequences in one cache, decoded one token each a step: every sequence's bytes counted.
TEST(ReferenceModelCommands, BenchDecodeRunsABatch) {
  std::vector<nlohmann::json> runs;
  for (const char* batch : {"1", "3"}) {
    const auto [status, output] =
        testutil::run_tool("bench decode --model " + kModel + " --text " + kText +
                           " --contexts 96 --policies 'fp16;tq_mse:b=3|window=16|select=topk:budget=0.5' "
                           "--decode-tokens 3 --json --batch " + batch);
    ASSERT_EQ(status, 0) << output;
    runs.push_back(nlohmann::json::parse(output).at("rows"));
  }
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(runs[1][p].at("batch"), 3);
    EXPECT_GT(runs[1][p].at("decode_tokens_per_second").get<double>(), 0.0);
    // Three sequences of the same tokens hold three times the bytes (the calibration once).
    const double one = runs[0][p].at("cache_bytes").get<double>(), three = runs[1][p].at("cache_bytes").get<double>();
    EXPECT_NEAR(three / one, 3.0, 0.05) << runs[1][p].at("policy");
    EXPECT_NEAR(runs[1][p].at("bits_per_value").get<double>(), runs[0][p].at("bits_per_value").get<double>(), 0.2);
  }
}

TEST(ReferenceModelCommands, GenerateStreamsText) {
  const auto [status, output] = testutil::run_tool("generate --model " + kModel +
                                                   " --prompt 'The pass key is 314. What is the pass key? The pass key "
                                                   "is' --max-tokens 8 --policy fp16");
  ASSERT_EQ(status, 0) << output;
  // The model answers from the prompt: the pass key comes back.
  EXPECT_NE(output.find("The pass key is 314. What is the pass key? The pass key is 314"), std::string::npos)
      << output;
  EXPECT_NE(output.find("8 generated"), std::string::npos) << output;
}

}  // namespace
}  // namespace kvsketch::model

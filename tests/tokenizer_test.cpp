// The tokenizer against Hugging Face `tokenizers`: five tokenizer.json layouts (Llama 2's
// SentencePiece-style BPE with byte fallback, Mistral's Metaspace, GPT-2's, Llama 3's and Qwen2's
// byte-level BPE), each with special and added tokens, give the library's ids and decoded text on
// 2 MB of varied text (tests/data/tokenizers, made by training/tokenizer_fixtures.py).
#include <gtest/gtest.h>
#include <zlib.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvsketch/model/tokenizer.hpp"
#include "test_util.hpp"

namespace kvsketch::model {
namespace {

const std::string kDir = std::string(KVSKETCH_TEST_DATA_DIR) + "/tokenizers/";

std::vector<std::string> read_chunks() {
  gzFile f = gzopen((kDir + "text.jsonl.gz").c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::string all;
  char buffer[1 << 16];
  for (int n; (n = gzread(f, buffer, sizeof buffer)) > 0;) all.append(buffer, static_cast<size_t>(n));
  gzclose(f);
  std::vector<std::string> chunks;
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) chunks.push_back(nlohmann::json::parse(line).get<std::string>());
  return chunks;
}

uint32_t crc_of(const void* data, size_t bytes) {
  return static_cast<uint32_t>(crc32(0, static_cast<const Bytef*>(data), static_cast<uInt>(bytes)));
}

class GoldenIds : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenIds, EveryChunkGivesTheLibrarysIdsAndText) {
  static const std::vector<std::string> chunks = read_chunks();
  const Tokenizer tokenizer = Tokenizer::load(kDir + GetParam() + ".json");
  std::ifstream in(kDir + GetParam() + ".golden.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_EQ(golden.at("chunks").size(), chunks.size());
  ASSERT_GT(chunks.size(), 1000u);
  size_t id_mismatches = 0, text_mismatches = 0, total_ids = 0;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const auto ids = tokenizer.encode(chunks[i]);
    const auto& expected = golden.at("chunks")[i];
    total_ids += ids.size();
    if (ids.size() != expected[0].get<size_t>() || crc_of(ids.data(), ids.size() * 4) != expected[1].get<uint32_t>()) {
      if (++id_mismatches <= 3) {
        std::string shown;
        for (size_t j = 0; j < std::min<size_t>(ids.size(), 40); ++j) shown += std::to_string(ids[j]) + " ";
        ADD_FAILURE() << GetParam() << " chunk " << i << ": " << ids.size() << " ids, expected " << expected[0]
                      << "\n text: " << nlohmann::json(chunks[i].substr(0, 200)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n ids: " << shown
                      << (i < golden.at("first_ids").size() ? "\n expected: " + golden.at("first_ids")[i].dump() : "");
      }
      continue;
    }
    const std::string text = tokenizer.decode(ids);
    if (crc_of(text.data(), text.size()) != expected[2].get<uint32_t>() && ++text_mismatches <= 3)
      ADD_FAILURE() << GetParam() << " chunk " << i << " decodes to " << nlohmann::json(text.substr(0, 200)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  EXPECT_EQ(id_mismatches, 0u) << GetParam();
  EXPECT_EQ(text_mismatches, 0u) << GetParam();
  std::printf("%s: %zu chunks, %zu ids identical\n", GetParam(), chunks.size(), total_ids);
}

INSTANTIATE_TEST_SUITE_P(Layouts, GoldenIds,
                         ::testing::Values("llama2_sentencepiece", "mistral_metaspace", "gpt2_byte_level",
                                           "llama3_byte_level", "qwen2_byte_level"));

TEST(Tokenizer, SpecialTokensAndRoundTrip) {
  const Tokenizer t = Tokenizer::load(kDir + "llama2_sentencepiece.json");
  const auto bos = t.token_to_id("<s>");
  ASSERT_TRUE(bos.has_value());
  const auto ids = t.encode("Hello world");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), *bos);
  EXPECT_NE(t.encode("Hello world", false).front(), *bos);
  EXPECT_EQ(t.decode(ids), "Hello world");
  EXPECT_EQ(t.decode(ids, false), "<s> Hello world");
  const auto im = t.encode("a <|im_start|>b", false);
  EXPECT_NE(std::find(im.begin(), im.end(), *t.token_to_id("<|im_start|>")), im.end());
  EXPECT_EQ(t.id_to_token(*bos), "<s>");
}

TEST(TokenizerBadInput, ProblemsAreNamed) {
  const Tokenizer t = Tokenizer::load(kDir + "gpt2_byte_level.json");
  EXPECT_NE(testutil::error_of([&] { t.encode("ok \xff\xfe bad"); }).find("not valid UTF-8 at byte 3"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] { t.encode("\xe2\x82"); }).find("not valid UTF-8 at byte 0"), std::string::npos);
  EXPECT_NE(testutil::error_of([&] { t.decode({1, -5}); }).find("id -5 (at 1) is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([&] { t.decode({1 << 20}); }).find("is not in the vocabulary"), std::string::npos);
  auto parse_error = [](const std::string& json) {
    return testutil::error_of([&] { Tokenizer::parse(json, "t.json"); });
  };
  EXPECT_NE(parse_error("{\"model\": ").find("t.json: not valid JSON"), std::string::npos);
  EXPECT_NE(parse_error("{\"version\": \"1.0\"}").find("not a tokenizer.json"), std::string::npos);
  EXPECT_NE(parse_error(R"({"model": {"type": "WordPiece", "vocab": {}}})").find("model type \"WordPiece\" is not "
                                                                                  "supported"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a b"]}})")
                .find("merge 'a b' names a token missing"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]}})")
                .find("gives 'ab', which is not in the vocabulary"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"pre_tokenizer": {"type": "BertPreTokenizer"}, "model": {"type": "BPE", "vocab": {},
                           "merges": []}})")
                .find("pre_tokenizer type 'BertPreTokenizer' is not supported"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"},
                           "behavior": "Isolated"}, "model": {"type": "BPE", "vocab": {}, "merges": []}})")
                .find("does not compile"),
            std::string::npos);
  EXPECT_NE(parse_error(R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})").find("has id -3"),
            std::string::npos);
  EXPECT_NE(testutil::error_of([] { Tokenizer::load("/nonexistent/tokenizer.json"); }).find("cannot open tokenizer"),
            std::string::npos);
}

}  // namespace
}  // namespace kvsketch::model

// The kvsketch tool as a user runs it.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <memory>

namespace {

std::pair<int, std::string> run(const std::string& arguments) {
  const std::string command = std::string(KVSKETCH_TOOL_PATH) + " " + arguments + " 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  std::string output;
  std::array<char, 4096> buffer;
  size_t got;
  while ((got = fread(buffer.data(), 1, buffer.size(), pipe.get())) > 0) output.append(buffer.data(), got);
  const int status = pclose(pipe.release());
  return {WEXITSTATUS(status), output};
}

}  // namespace

TEST(Cli, DistortionJsonHasExactlyTheDocumentedKeys) {
  auto [status, output] = run("distortion --dim 128 --bits 1,3 --codecs tq_mse,tq_prod,qjl --vectors 300 --queries 8 --json");
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output);
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.size(), 12u);
    for (const char* key : {"codec", "bits", "dim", "mse", "ip_bias", "ip_bias_stderr", "ip_bias_factor", "ip_var_d",
                            "mse_lower_bound", "mse_upper_bound", "ip_var_d_lower_bound", "ip_var_d_upper_bound"})
      EXPECT_TRUE(row.contains(key)) << key;
  }
  EXPECT_NEAR(rows[0]["mse"].get<double>(), 0.3609, 0.02);
}

TEST(Cli, FileInputAndBadArguments) {
  auto [status, output] = run(std::string("distortion --bits 2 --vectors 500 --queries 4 --input ") + KVSKETCH_DATA_DIR +
                              "/sift-5k.tsv");
  EXPECT_EQ(status, 0) << output;
  EXPECT_NE(output.find("tq_prod"), std::string::npos);
  std::tie(status, output) = run("distortion --bits 12");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("1..8"), std::string::npos) << output;
  std::tie(status, output) = run("distortion --codecs pq");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("tq_mse, tq_prod, qjl"), std::string::npos) << output;
  std::tie(status, output) = run("distortion --input /nonexistent.npy");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("cannot open"), std::string::npos) << output;
}

TEST(Cli, AttentionJsonHasTheDocumentedKeys) {
  auto [status, output] = run("attention --synthetic flat --tokens 600 --num-queries 4 --policies 'fp16;tq_mse:b=3' --json");
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows)
    for (const char* key : {"policy", "regime", "bits_per_value", "bytes", "rel_error", "kl", "top8_overlap",
                            "ns_per_query", "speedup_vs_fp16"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_EQ(rows[0]["bits_per_value"].get<double>(), 16.0);
  EXPECT_LT(rows[1]["bits_per_value"].get<double>(), 8.0);  // 600 tokens: the fp16 window weighs
  std::tie(status, output) = run("attention --synthetic sharp --tokens 600");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown regime 'sharp'"), std::string::npos) << output;
  std::tie(status, output) = run("attention --synthetic flat --tokens 600 --policies 'zip:b=2'");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown codec 'zip'"), std::string::npos) << output;
  std::tie(status, output) = run("attention --keys /nonexistent.npy --values x.npy --queries q.npy");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("cannot open"), std::string::npos) << output;
}

// The kvsketch tool as a user runs it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>

#include "test_util.hpp"

namespace {

std::pair<int, std::string> run(const std::string& arguments) { return kvsketch::testutil::run_tool(arguments); }

// The JSON rows a command prints, checked to be `count` (empty, with a test failure, otherwise).
nlohmann::json json_rows(const std::string& arguments, size_t count) {
  const auto [status, output] = run(arguments);
  EXPECT_EQ(status, 0) << output;
  if (status != 0) return nlohmann::json::array();
  const auto rows = nlohmann::json::parse(output);
  EXPECT_EQ(rows.size(), count) << output;
  return rows.size() == count ? rows : nlohmann::json::array();
}

}  // namespace

TEST(Cli, DistortionJsonHasExactlyTheDocumentedKeys) {
  auto [status, output] = run("distortion --dim 128 --bits 1,3 --codecs tq_mse,tq_prod,qjl --vectors 300 --queries 8 --json");
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output);
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_EQ(row.size(), 11u);
    for (const char* key : {"codec", "bits", "dim", "mse", "ip_bias", "ip_bias_stderr", "ip_bias_factor", "ip_var_d",
                            "mse_lower_bound", "mse_upper_bound", "ip_var_d_upper_bound"})
      EXPECT_TRUE(row.contains(key)) << key;
    // TurboQuant's theorems bound its own rows only: QJL rows carry no upper bounds.
    const std::string codec = row["codec"];
    EXPECT_EQ(row["mse_upper_bound"].is_null(), codec != "tq_mse") << codec;
    EXPECT_EQ(row["ip_var_d_upper_bound"].is_null(), codec != "tq_prod") << codec;
    EXPECT_FALSE(row["mse_lower_bound"].is_null());  // random inputs: uniform on the sphere
  }
  EXPECT_NEAR(rows[0]["mse"].get<double>(), 0.3609, 0.02);
}

TEST(Cli, FileInputAndBadArguments) {
  auto [status, output] = run(std::string("distortion --bits 2 --vectors 500 --queries 4 --input ") + KVSKETCH_DATA_DIR +
                              "/sift-5k.tsv:ids");
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

// Captured tensors: the rows used are checked (NaN, Inf, norms whose squares overflow), named by
// file and row; rows past --tokens are not read.
TEST(Cli, CapturedTensorsAreCheckedWhereUsed) {
  const std::string dir = ::testing::TempDir();
  auto write_rows = [&](const std::string& name, size_t rows, const std::string& special, size_t special_row) {
    std::FILE* file = std::fopen((dir + name).c_str(), "w");
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < 8; ++c) {
        const std::string value =
            r == special_row && c == 2 ? special : std::to_string(0.1 * ((r * 7 + c * 3) % 11) + 0.5);
        std::fputs((value + (c == 7 ? "\n" : "\t")).c_str(), file);
      }
    std::fclose(file);
    return dir + name;
  };
  const std::string keys = write_rows("kvsketch_keys.tsv", 20, "nan", 15);
  const std::string values = write_rows("kvsketch_values.tsv", 20, "", 99);
  const std::string queries = write_rows("kvsketch_queries.tsv", 2, "", 99);
  const std::string huge = write_rows("kvsketch_huge.tsv", 2, "1e20", 1);
  const std::string files = " --policies fp16 --keys " + keys + " --values " + values + " --queries ";
  auto [status, output] = run("attention --tokens 10" + files + queries);
  EXPECT_EQ(status, 0) << output;
  std::tie(status, output) = run("attention --tokens 16" + files + queries);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find(keys + ": row 15 column 2 is NaN"), std::string::npos) << output;
  std::tie(status, output) = run("attention --tokens 10" + files + huge);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find(huge + ": row 1 has a norm beyond the float range"), std::string::npos) << output;
}

TEST(Cli, AttentionJsonHasTheDocumentedKeys) {
  const auto rows = json_rows("attention --synthetic flat --tokens 600 --num-queries 4 --policies 'fp16;tq_mse:b=3' --json", 2);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& row : rows)
    for (const char* key : {"policy", "regime", "bits_per_value", "bytes", "rel_error", "kl", "top8_overlap",
                            "ns_per_query", "speedup_vs_fp16"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_EQ(rows[0]["bits_per_value"].get<double>(), 16.0);
  EXPECT_LT(rows[1]["bits_per_value"].get<double>(), 8.0);  // 600 tokens: the fp16 window weighs
  EXPECT_GT(rows[1]["speedup_vs_fp16"].get<double>(), 0.0);
  // Without fp16 in the run there is no speed-up to report: null, not 0.
  auto [status, output] =
      run("attention --synthetic flat --tokens 600 --num-queries 4 --policies 'tq_mse:b=3' --json");
  ASSERT_EQ(status, 0) << output;
  EXPECT_TRUE(nlohmann::json::parse(output)[0]["speedup_vs_fp16"].is_null()) << output;
  std::tie(status, output) = run("attention --synthetic sharp --tokens 600");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown regime 'sharp'"), std::string::npos) << output;
  std::tie(status, output) = run("attention --synthetic flat --tokens 600 --policies 'zip:b=2'");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown codec 'zip'"), std::string::npos) << output;
  // A bad policy late in the list is refused before any row is printed or measured.
  for (const char* command : {"attention --synthetic flat --tokens 600 --policies 'fp16;tq_mse:b=9' --json",
                              "attention --synthetic flat --tokens 600 --policies 'fp16;tq_mse:b=9'",
                              "bench attention --tokens 1000 --repetitions 1 --policies 'fp16;tq_mse:b=9'",
                              "bench append --tokens 1000 --policies 'fp16;tq_mse:b=9'"}) {
    std::tie(status, output) = run(command);
    EXPECT_EQ(status, 2) << command;
    EXPECT_EQ(output.rfind("kvsketch: error: policy 'tq_mse:b=9'", 0), 0u) << command << ": " << output;
  }
  std::tie(status, output) = run("attention --keys /nonexistent.npy --values x.npy --queries q.npy");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("cannot open"), std::string::npos) << output;
  // A list option given empty is refused (exit status 2, as every bad argument), not read as the default list.
  for (const char* command : {"attention --synthetic flat --tokens 600 --policies ';'",
                              "bench attention --tokens 1000 --policies ''", "sparse --tokens 2048 --methods ''",
                              "ann eval --data sift-5k --codecs ';'"}) {
    std::tie(status, output) = run(command);
    EXPECT_EQ(status, 2) << command;
    EXPECT_NE(output.find("give at least one item"), std::string::npos) << command << ": " << output;
  }
}

TEST(Cli, BenchAppendJsonHasThePagedAndCopyRates) {
  const auto rows = json_rows("bench append --tokens 2048 --policies 'fp16;tq_mse:b=3' --json", 2);
  for (const auto& row : rows)
    for (const char* key : {"prefill_tokens_per_s", "decode_tokens_per_s", "paged_prefill_tokens_per_s",
                            "paged_decode_tokens_per_s", "copy_tokens_per_s"})
      EXPECT_GT(row[key].get<double>(), 0.0) << key;
}

// The row keys; with --kv-heads a whole layer's step, its bytes those of every KV head.
TEST(Cli, BenchAttentionJsonHasTheDocumentedKeys) {
  const std::string common = "bench attention --tokens 1024 --threads 1 --repetitions 1 --layers 2 "
                             "--policies 'fp16;tq_mse:b=3' --json";
  auto [status, output] = run(common);
  ASSERT_EQ(status, 0) << output;
  const auto group = nlohmann::json::parse(output);
  ASSERT_EQ(group.size(), 2u);
  for (const auto& row : group)
    for (const char* key : {"policy", "tokens", "threads", "bits_per_value", "ns_per_query", "gbytes_per_s",
                            "speedup_vs_fp16", "memory_gbytes_per_s", "bandwidth_fraction", "kv_heads",
                            "huge_page_bytes", "rows", "spread", "unstable", "peak_memory_bytes"})
      EXPECT_TRUE(row.contains(key)) << key;
  // One pass: no spread; the process holds at least the two caches' copies.
  EXPECT_EQ(group[0]["spread"].get<double>(), 0.0);
  EXPECT_GT(group[0]["peak_memory_bytes"].get<size_t>(), 2u * 1024 * 128 * 2 * 2);
  EXPECT_EQ(group[0]["speedup_vs_fp16"].get<double>(), 1.0);
  EXPECT_EQ(group[0]["rows"].get<std::string>(), "plain");  // fp16 rows are never cut into fields
  const std::string rows = group[1]["rows"].get<std::string>();
  EXPECT_TRUE(rows == "plain" || rows == "quads") << rows;
  EXPECT_EQ(group[0]["kv_heads"].get<size_t>(), 1u);
  EXPECT_EQ(group[0]["bytes"].get<size_t>(), 1024u * 128 * 2 * 2);  // K and V in fp16
  std::tie(status, output) = run(common + " --kv-heads 3");
  ASSERT_EQ(status, 0) << output;
  const auto layer = nlohmann::json::parse(output);
  ASSERT_EQ(layer.size(), 2u);
  for (size_t p = 0; p < 2; ++p) {
    EXPECT_EQ(layer[p]["kv_heads"].get<size_t>(), 3u);
    EXPECT_EQ(layer[p]["bytes"].get<size_t>(), 3 * group[p]["bytes"].get<size_t>()) << layer[p]["policy"];
    EXPECT_EQ(layer[p]["bits_per_value"].get<double>(), group[p]["bits_per_value"].get<double>());
  }
}

// Errors in a synthetic dataset's spec name the dataset, not a codec.
TEST(Cli, DatasetSpecErrorsNameTheDataset) {
  auto [status, output] = run("ann eval --data gaussian:d=8,n=100,q=1");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("dataset 'gaussian': unknown parameter 'q'"), std::string::npos) << output;
  std::tie(status, output) = run("ann eval --data gaussian:d=1,n=100");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("dataset 'gaussian': parameter d=1 out of range"), std::string::npos) << output;
  std::tie(status, output) = run("sparse --synthetic flat --tokens 2048 --methods 'topk:budget=x'");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("selector 'topk': parameter budget='x' is not a number"), std::string::npos) << output;
}

TEST(Cli, AnnEvalJsonHasTheDocumentedKeysAndFaissRows) {
  auto [status, output] =
      run("ann eval --data sift-5k --queries 100 --codecs 'tq_mse:b=4,rescale=1' --k 1,10,100 --baselines faiss:SQ --json");
  if (output.find("built without FAISS") != std::string::npos)
    GTEST_SKIP() << "FAISS is an extra: bash scripts/setup.sh extras, then rebuild";
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output.substr(output.find('[')));
  ASSERT_EQ(rows.size(), 2u);  // ours and FAISS SQ4
  for (const auto& row : rows)
    for (const char* key : {"codec", "bits", "bytes_per_vector", "recall_1_at_1", "recall_1_at_10", "recall_1_at_100",
                            "recall_10_at_10", "build_s", "ms_per_query", "ms_per_query_batch"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_EQ(rows[0]["bytes_per_vector"].get<int>(), 64 + 2 + 2);
  EXPECT_EQ(rows[0]["recall_1_at_100"].get<double>(), 1.0);
  EXPECT_GT(rows[0]["recall_1_at_10"].get<double>(), 0.98);
  EXPECT_EQ(rows[1]["codec"], "faiss:SQ4");
  EXPECT_EQ(rows[1]["bytes_per_vector"].get<int>(), 64);
  // --no-center quantizes x itself: on SIFT's shared offset that finds fewer true neighbours first.
  std::tie(status, output) = run("ann eval --data sift-5k --queries 100 --codecs 'tq_mse:b=2,rescale=1' --k 1,10 "
                                 "--no-center --json");
  ASSERT_EQ(status, 0) << output;
  const auto uncentred = nlohmann::json::parse(output);
  std::tie(status, output) = run("ann eval --data sift-5k --queries 100 --codecs 'tq_mse:b=2,rescale=1' --k 1,10 --json");
  const auto centred = nlohmann::json::parse(output);
  EXPECT_NE(uncentred[0]["codec"].get<std::string>().find("+uncentred"), std::string::npos);
  EXPECT_LT(uncentred[0]["recall_1_at_1"].get<double>(), centred[0]["recall_1_at_1"].get<double>());
  // --repetitions: every build timed, build_s their median; the index (and so recall) unchanged.
  std::tie(status, output) =
      run("ann eval --data sift-5k --queries 100 --codecs 'tq_mse:b=2,rescale=1' --k 1,10 --repetitions 3 --json");
  ASSERT_EQ(status, 0) << output;
  const auto repeated = nlohmann::json::parse(output);
  auto each = repeated[0]["build_s_each"].get<std::vector<double>>();
  ASSERT_EQ(each.size(), 3u);
  std::sort(each.begin(), each.end());
  EXPECT_EQ(repeated[0]["build_s"].get<double>(), each[1]);
  EXPECT_EQ(repeated[0]["recall_1_at_1"], centred[0]["recall_1_at_1"]);
  std::tie(status, output) = run("ann eval --data sift-5k --repetitions 0");
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("--repetitions"), std::string::npos) << output;
}

TEST(Cli, AnnBenchWalksEachCurveAndCountsBytes) {
  auto [status, output] = run(
      "ann bench --data sift-5k --queries 100 --indexes 'ivf:nlist=16|tq_mse:b=4,rescale=1;faiss:IVF16,PQ128x4fs' "
      "--nprobe 1,4,16,64 --threads 1,2 --single 20 --repetitions 1 --json");
  if (output.find("needs FAISS") != std::string::npos)
    GTEST_SKIP() << "FAISS is an extra: bash scripts/setup.sh extras, then rebuild";
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output);
  ASSERT_EQ(rows.size(), 2u * 3u * 2u);  // two indexes, nprobe 1, 4, 16 (64 > nlist), two thread counts
  for (const auto& row : rows) {
    for (const char* key : {"index", "parameter", "value", "threads", "recall", "qps_single", "qps_batch", "train_s",
                            "add_s", "bytes_per_vector"})
      EXPECT_TRUE(row.contains(key)) << key;
    EXPECT_GT(row["qps_single"].get<double>(), 0.0);
  }
  // Ours: recall grows with nprobe and, with every list probed, is the flat scan's (above 0.9);
  // bytes: 64 code bytes + the norm in the code + the l2 norm + the id, and the centroids.
  EXPECT_LT(rows[0]["recall"].get<double>(), rows[2]["recall"].get<double>());
  EXPECT_LT(rows[2]["recall"].get<double>(), rows[4]["recall"].get<double>());
  EXPECT_GT(rows[4]["recall"].get<double>(), 0.9);
  EXPECT_EQ(rows[4]["recall"], rows[5]["recall"]);  // the same answer on two threads
  const double ours = rows[0]["bytes_per_vector"].get<double>();
  EXPECT_GT(ours, 64 + 2 + 2 + 8 + 16 * 128 * 4 / 4400.0);
  EXPECT_LT(ours, 64 + 2 + 2 + 8 + 16 * 128 * 4 / 4400.0 + 16 * 31 * 64 / 4400.0 + 1);  // + block padding
  EXPECT_EQ(rows[6]["index"], "faiss:IVF16,PQ128x4fs");
  EXPECT_GT(rows[10]["recall"].get<double>(), 0.85);
  std::tie(status, output) = run("ann bench --data sift-5k --indexes 'ivf:nlist=8,nprobe=9|tq_mse:b=4'");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("nprobe must be in 1..nlist"), std::string::npos) << output;
}

TEST(Cli, AnnBuildSearchAndBadInput) {
  const std::string index = ::testing::TempDir() + "/kvsketch_cli.kvi";
  const std::string sift = std::string(KVSKETCH_DATA_DIR) + "/sift-5k.tsv:ids";
  auto [status, output] = run("ann build --data " + sift + " --queries 10 --codec tq_mse:b=4,rescale=1 --out " + index);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("4990 vectors x 128 dims"), std::string::npos) << output;
  // The base rows themselves as queries: each finds itself first.
  std::tie(status, output) = run("ann search --index " + index + " --queries " + sift + " --k 3 --json");
  ASSERT_EQ(status, 0) << output;
  const auto hits = nlohmann::json::parse(output);
  ASSERT_EQ(hits.size(), 5000u);
  size_t self = 0;
  for (size_t q = 0; q < 4990; ++q) self += hits[q]["ids"][0].get<size_t>() == q;
  EXPECT_GT(self, 4900u);
  std::tie(status, output) = run("ann eval --data sift-5k --metric manhattan");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown metric 'manhattan'"), std::string::npos) << output;
  std::tie(status, output) = run("ann eval --data sift-5k --k 0");
  EXPECT_EQ(status, 2);
  std::tie(status, output) = run("ann search --index " + std::string(KVSKETCH_DATA_DIR) + "/sift-5k.tsv --queries " + sift);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("not a kvsketch index file"), std::string::npos) << output;
  const std::string small = ::testing::TempDir() + "/kvsketch_cli_small.tsv";
  std::FILE* file = std::fopen(small.c_str(), "w");
  std::fputs("1 2 3\n4 5 6\n", file);
  std::fclose(file);
  std::tie(status, output) = run("ann search --index " + index + " --queries " + small);
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("dimension 3, the index 128"), std::string::npos) << output;
  // Without --queries a matrix file is indexed whole (it used to lose its last 500 rows).
  std::tie(status, output) = run("ann build --data " + small + " --codec tq_mse:b=4 --out " + index);
  ASSERT_EQ(status, 0) << output;
  EXPECT_NE(output.find("2 vectors x 3 dims"), std::string::npos) << output;
}

TEST(Cli, SparseJsonHasTheDocumentedKeys) {
  auto [status, output] = run("sparse --synthetic flat --tokens 2048 --num-queries 4 "
                              "--methods 'magicpig:K=10,L=150;topk:budget=0.02;window' --json");
  ASSERT_EQ(status, 0) << output;
  const auto rows = nlohmann::json::parse(output);
  ASSERT_EQ(rows.size(), 3u);
  for (const auto& row : rows)
    for (const char* key : {"method", "regime", "budget", "index_bytes", "rel_error", "lse_error", "kl"})
      EXPECT_TRUE(row.contains(key)) << key;
  EXPECT_EQ(rows[0]["method"], "magicpig:K=10,L=150,hits=2,center=1");
  // 1,980 body tokens: one block of 1,024 (ids and 150 x 1,025 bucket starts), the open tokens'
  // buffer of 1,024 codes per table, 2,048 norms, one epoch's centre and start, the key sum.
  EXPECT_EQ(rows[0]["index_bytes"].get<size_t>(), 150u * (1024 + 1025 + 1024) * 2 + 2048 * 4 + 128 * 4 + 4 + 128 * 8);
  EXPECT_LT(rows[0]["index_bytes"].get<size_t>(), rows[0]["kv_bytes"].get<size_t>());
  EXPECT_NEAR(rows[1]["budget"].get<double>(), 0.02, 0.001);
  EXPECT_EQ(rows[2]["budget"].get<double>(), 0.0);
  std::tie(status, output) = run("sparse --synthetic flat --tokens 2048 --methods 'magicpig:K=40,L=10'");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("K=40 out of range"), std::string::npos) << output;
  std::tie(status, output) = run("sparse --synthetic flat --tokens 2048 --synthetic-model latent --methods window");
  EXPECT_EQ(status, 2);
  EXPECT_NE(output.find("unknown model 'latent'; expected independent or hidden-state"), std::string::npos) << output;
  // Missing data or a bad method late in the list: refused before the table's header.
  for (const char* command : {"sparse --tokens 2048 --methods window",
                              "sparse --synthetic flat --tokens 2048 --methods 'window;nope'"}) {
    std::tie(status, output) = run(command);
    EXPECT_EQ(status, 2) << command;
    EXPECT_EQ(output.rfind("kvsketch: error: ", 0), 0u) << command << ": " << output;
  }
}

// The two synthetic models make different caches from one seed, each the same on every run.
TEST(Cli, SyntheticModelsAreDistinctAndReproducible) {
  auto exact_window = [](const std::string& model) {
    auto [status, output] = run("sparse --synthetic long-tailed --tokens 1024 --num-queries 4 --synthetic-model " +
                                model + " --methods window --json");
    EXPECT_EQ(status, 0) << output;
    return nlohmann::json::parse(output)[0]["rel_error"].get<double>();
  };
  EXPECT_EQ(exact_window("hidden-state"), exact_window("hidden-state"));
  EXPECT_NE(exact_window("hidden-state"), exact_window("independent"));
}

// Table columns line up whatever the policy names' lengths (a fixed 28-character column let long
// names push the rest of their row right).
TEST(Cli, TableColumnsAlignForLongNames) {
  auto [status, output] = run("attention --synthetic flat --tokens 300 --num-queries 2 --policies "
                              "'fp16;split:tq_mse:b=3@32+tq_mse:b=2@96|center:split:tq_mse:b=3@32+tq_mse:b=2@96'");
  ASSERT_EQ(status, 0) << output;
  std::vector<std::string> rows;
  for (size_t start = 0, end; (end = output.find('\n', start)) != std::string::npos && rows.size() < 3; start = end + 1)
    rows.push_back(output.substr(start, end - start));
  ASSERT_EQ(rows.size(), 3u) << output;  // header, fp16, the split
  for (const char* column : {"regime", "us/query"}) {
    const size_t at = rows[0].find(column);
    ASSERT_NE(at, std::string::npos);
    // Left-aligned "regime" starts where each row's regime does; "us/query" ends with its numbers.
    const size_t edge = std::string(column) == "regime" ? at : at + std::string(column).size();
    for (size_t r = 1; r < 3; ++r) {
      ASSERT_GE(rows[r].size(), edge) << rows[r];
      if (std::string(column) == "regime") {
        EXPECT_EQ(rows[r].compare(edge, 4, "flat"), 0) << rows[r];
      } else {
        EXPECT_TRUE(std::isdigit(static_cast<unsigned char>(rows[r][edge - 1]))) << rows[r];
        EXPECT_EQ(rows[r][edge], ' ') << rows[r];
      }
    }
  }
  std::tie(status, output) = run("sparse --help");
  EXPECT_NE(output.find("BalanceKV"), std::string::npos);
  EXPECT_NE(output.find("balancekv:ratio="), std::string::npos);
}

// A cache saved by --save-cache and evaluated again with --cache gives the same measurements.
TEST(Cli, SavedCacheEvaluatesAsBuilt) {
  const std::string file = ::testing::TempDir() + "/kvsketch_cli_saved.kvc";
  const std::string data = "attention --synthetic needle --tokens 600 --num-queries 4 --json ";
  auto [status, output] = run(data + "--policies 'tq_prod:b=3|tq_mse:b=3' --save-cache " + file);
  ASSERT_EQ(status, 0) << output;
  const auto built = nlohmann::json::parse(output)[0];
  std::tie(status, output) = run(data + "--cache " + file);
  ASSERT_EQ(status, 0) << output;
  const auto loaded = nlohmann::json::parse(output)[0];
  for (const char* key : {"bytes", "rel_error", "kl", "top8_overlap", "score_error_mean"})
    EXPECT_EQ(built[key], loaded[key]) << key;
  EXPECT_EQ(loaded["policy"], "tq_prod:b=3|tq_mse:b=3|sinks=4|window=128|block=32");
}

// bench attention --batch: the paged cache's batched step against single calls, and (one
// sequence) against KVCache; the sequences' tokens add up, every ratio is measured.
TEST(Cli, BatchedAttentionBenchReportsItsRatios) {
  const auto batch = run("bench attention --batch 2 --contexts 300,200 --threads 1 --policies 'tq_mse:b=3' --layers 1 "
                         "--repetitions 1 --dim 64 --json");
  ASSERT_EQ(batch.first, 0) << batch.second;
  const auto rows = nlohmann::json::parse(batch.second);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]["batch"], 2);
  EXPECT_EQ(rows[0]["tokens"], 500);
  EXPECT_GT(rows[0]["batch_speedup"].get<double>(), 0.0);
  EXPECT_GT(rows[0]["fork_fraction_of_append"].get<double>(), 0.0);
  EXPECT_TRUE(rows[0]["paged_vs_kv_cache"].is_null());
  const auto one = run("bench attention --batch 1 --contexts 300,200 --threads 1 --policies 'fp16' --layers 1 "
                       "--repetitions 1 --dim 64 --json");
  ASSERT_EQ(one.first, 0) << one.second;
  const auto single = nlohmann::json::parse(one.second);
  ASSERT_EQ(single.size(), 2u);  // a run per context
  EXPECT_EQ(single[1]["tokens"], 200);
  EXPECT_GT(single[0]["paged_vs_kv_cache"].get<double>(), 0.0);
}

// Bad input through the C++ API and the CLI, one row per case of the kinds a new user's audit
// found: each is a kvsketch::Error (exit status 2 from the tool) whose message names the problem,
// within seconds, and leaves what it was given unchanged. The cases that crashed, hung or returned
// garbage before are named in the comments.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kvsketch/ann.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/codec.hpp"
#include "kvsketch/eval/distortion.hpp"
#include "kvsketch/eval/datasets.hpp"
#include "kvsketch/kv_cache.hpp"
#include "kvsketch/sparse_attention.hpp"
#include "test_util.hpp"

namespace kvsketch {
namespace {

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/kvsketch_bad_" + name; }

std::string write(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string read(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

// A version 1.0 .npy file of float32 zeros with the header dict given.
std::string npy(const std::string& dict, size_t values, char minor_version = 0, char major_version = 1) {
  std::string header = dict;
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY", 6) + major_version + minor_version;
  file += static_cast<char>(header.size() & 0xFF);
  file += static_cast<char>(header.size() >> 8);
  return file + header + std::string(4 * values, '\0');
}

struct ApiCase {
  const char* name;
  std::function<void()> call;
  const char* message;  // a part of the error's text
};

TEST(BadInput, ApiCallsAreClearErrorsWithinSeconds) {
  const std::string f4 = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  KVPolicy zero_block = KVPolicy::parse("fp16");
  zero_block.block = 0;  // divided by zero inside KVCache before validation moved there
  KVPolicy bad_codec = KVPolicy::parse("fp16");
  bad_codec.codecs.value = "tq_mse:b=99";
  std::string nested;
  for (int i = 0; i < 18000; ++i) nested += "center:";  // ran past 5 minutes
  nested += "tq_mse:b=3";
  std::filesystem::create_directories(temp_path("directory.kvc"));
  std::filesystem::create_directories(temp_path("directory.npy"));
  const std::vector<ApiCase> cases = {
      {"policy block=0 built by hand", [&] { KVCache(1, 1, 64, zero_block); }, "block must be in 1.."},
      {"policy codec built by hand", [&] { KVCache(1, 1, 64, bad_codec); }, "b=99"},
      {"policy field given twice", [] { KVPolicy::parse("fp16|sinks=2|sinks=3"); }, "sinks is given twice"},
      {"policy layer given twice", [] { KVPolicy::parse("fp16|layer1=int8|layer01=fp16"); }, "layer1 is given twice"},
      {"cache of 4096 x 4096 heads", [] { KVCache(4096, 4096, 128, KVPolicy::parse("fp16")); }, "beyond the limits"},
      {"cache of haar heads", [] { KVCache(64, 64, 256, KVPolicy::parse("tq_mse:b=3,rotation=haar")); },
       "use rotation=hadamard"},
      {"dense sketch of 65536 x 8192", [] { make_codec("qjl:m=65536", 8192); }, "use sketch=hadamard"},
      {"cache of dense sketches beyond the memory bound",
       [] { KVCache(64, 64, 256, KVPolicy::parse("qjl:m=4096,sketch=gaussian")); }, "of rotations and sketches"},
      {"orthogonal sketch beyond 2048 dimensions", [] { make_codec("qjl:m=64", 4096); }, "use sketch=hadamard or gaussian"},
      {"18000 nested center:", [&] { make_codec(nested, 64); }, "'center:' is given twice"},
      {"center:center:", [] { make_codec("center:center:tq_mse:b=3", 64); }, "'center:' is given twice"},
      {"rotate:center:rotate:", [] { make_codec("rotate:center:rotate:tq_mse:b=3", 64); }, "'rotate:' is given twice"},
      {"quads: (a row packing, not a codec)", [] { make_codec("quads:tq_mse:b=3", 64); }, "unknown codec 'quads'"},
      {"haar at 8192 dimensions", [] { make_codec("tq_mse:b=3,rotation=haar", 8192); }, "rotation=haar: dimension"},
      {"codec beyond kMaxDim", [] { make_codec("tq_mse:b=3", kMaxDim + 1); }, "dimension must be in 1..8192"},
      {"index beyond kMaxDim", [] { FlatIndex(kMaxDim + 1, "tq_mse:b=4", Metric::kL2); }, "index: dimension"},
      {"index with 100000 threads",
       [] {
         FlatIndexOptions options;
         options.threads = 100000;
         FlatIndex(16, options);
       },
       "threads must be in 0..1024"},
      {"merge of undersized results",  // overflowed the heap
       [] {
         AttentionResult a{2, 4, std::vector<float>(8), std::vector<float>(2)}, b{2, 4, std::vector<float>(3), {}};
         merge_attention(a, b);
       },
       "other claims 2 heads x 4 dims but holds 3 outputs"},
      {"concat of a part with too few values",
       [] { concat_attention({AttentionResult{1, 4, std::vector<float>(2), std::vector<float>(1)}}); }, "a part claims"},
      {"npy big-endian dtype", [&] { read_matrix(write("big.npy", npy("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", 6))); },
       "dtype '>f4'"},
      {"npy dtype inside another string",
       [&] { read_matrix(write("sub.npy", npy("{'descr': '|<f4x', 'fortran_order': False, 'shape': (2, 3), }", 6))); },
       "dtype '|<f4x'"},
      {"npy version 9", [&] { read_matrix(write("v9.npy", npy(f4, 6, 0, 9))); }, "npy format version 9.0"},
      {"npy version 1.5", [&] { read_matrix(write("v15.npy", npy(f4, 6, 5))); }, "npy format version 1.5"},
      {"npy key twice",
       [&] { read_matrix(write("twice.npy", npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 6))); },
       "gives 'descr' twice"},
      {"npy without shape", [&] { read_matrix(write("noshape.npy", npy("{'descr': '<f4', 'fortran_order': False, }", 6))); },
       "needs 'descr', 'fortran_order' and 'shape'"},
      {"npy with bytes after the array", [&] { read_matrix(write("long.npy", npy(f4, 7))); }, "4 bytes after the array"},
      {"directory as a cache file", [&] { KVCache::load(temp_path("directory.kvc")); }, "is a directory, not a file"},
      {"directory as a matrix file", [&] { read_matrix(temp_path("directory.npy")); }, "is a directory, not a file"},
      {"missing index file", [&] { FlatIndex::load(temp_path("missing.kvi")); }, "No such file"},
      {"distortion input with a NaN row",
       [&] {
         DistortionConfig config;
         config.input = write("nan_row.tsv", "1 2 3 4\nnan 1 1 1\n");
         config.bits = {2};
         config.vectors = 2;
         config.queries = 1;
         run_distortion(config);
       },
       "input row 1 holds NaN or Inf"},
      {"HDF5 file on which libhdf5 itself crashes (segfault before it ran in a child process)",
       [] { read_matrix(KVSKETCH_DATA_DIR "/../fuzz/corpus/hdf5_reader/regression_libhdf5_segfault.hdf5:train"); },
       "libhdf5 failed on this file"},
      {"selector cap that leaves no table", [] { make_selector("magicpig:K=10,L=150,cap=0.01", 64); },
       "leaves no table"},
  };
  for (const ApiCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto start = std::chrono::steady_clock::now();
    const std::string message = testutil::error_of(c.call);
    EXPECT_NE(message.find(c.message), std::string::npos) << message;
    // Seconds, not minutes (an unbounded case ran past 5 minutes); generous for sanitizer builds.
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30.0);
  }
}

TEST(BadInput, EmptyBatchesAreEmptyResults) {
  // search with 0 queries divided by zero.
  FlatIndex index(16, "tq_mse:b=4", Metric::kL2);
  const auto rows = testutil::gaussian_matrix(8, 16, 1);
  index.add(rows.data(), 8);
  const Neighbors none = index.search(rows.data(), 0, 3);
  EXPECT_EQ(none.queries, 0u);
  EXPECT_TRUE(none.ids.empty());
  EXPECT_THROW(index.search(nullptr, 2, 3), Error);
}

// Every fp16 pair of the saved file `bytes` set to +Inf and to NaN in turn, checksum resealed, and
// handed to `load_and_use` (which loads the file at the path and checks what it answers): the
// loader must refuse it with an Error or load something whose answers are finite. Returns how many
// refusals named a row that decodes to NaN or Inf.
size_t non_finite_pairs_refused(const std::string& bytes, const std::string& name,
                                const std::function<void(const std::string&)>& load_and_use) {
  size_t refused_rows = 0;
  for (size_t at = 0; at + 2 <= bytes.size() - 16; ++at)
    for (const std::string value : {std::string("\x00\x7c", 2), std::string("\x00\x7e", 2)}) {
      SCOPED_TRACE(testing::Message() << "offset " << at);
      try {
        load_and_use(write(name, testutil::resealed_bytes(bytes, at, value)));
      } catch (const Error& e) {
        refused_rows += std::string(e.what()).find("decodes to NaN or Inf") != std::string::npos;
      }
      if (testing::Test::HasFatalFailure()) return refused_rows;
    }
  return refused_rows;
}

// An Inf norm made attention NaN, a NaN norm dropped a token, NaN index norms made rows unfindable.
TEST(BadInput, NonFiniteStoredValuesAreRefusedByTheLoaders) {
  KVCache cache(1, 1, 16, KVPolicy::parse("tq_prod:b=3|tq_mse:b=2.5|sinks=1|window=4|block=4"), 3);
  const auto keys = testutil::gaussian_matrix(13, 16, 2), values = testutil::gaussian_matrix(13, 16, 3);
  cache.append(0, keys.data(), values.data(), 13);
  cache.save(temp_path("finite.kvc"));
  const std::vector<float> query(16, 0.25f);
  // The body's norms are among the pairs: some refusals must name them.
  EXPECT_GT(non_finite_pairs_refused(read(temp_path("finite.kvc")), "corrupt.kvc",
                                     [&](const std::string& path) {
                                       const AttentionResult r = decode_attention(KVCache::load(path), 0, 0, query.data(), 1);
                                       ASSERT_TRUE(std::isfinite(r.lse[0]));
                                       for (const float x : r.output) ASSERT_TRUE(std::isfinite(x));
                                     }),
            0u);
  for (const char* codec : {"tq_prod:b=3", "tq_mse:b=4,rescale=1"}) {  // row layout, fast scan
    SCOPED_TRACE(codec);
    FlatIndex index(16, codec, Metric::kL2);
    const auto rows = testutil::gaussian_matrix(6, 16, 4);
    index.add(rows.data(), 6);
    index.save(temp_path("finite.kvi"));
    EXPECT_GT(non_finite_pairs_refused(read(temp_path("finite.kvi")), "corrupt.kvi",
                                       [&](const std::string& path) {
                                         const Neighbors hits = FlatIndex::load(path).search(rows.data(), 6, 6);
                                         for (const float score : hits.scores) ASSERT_TRUE(std::isfinite(score));
                                       }),
              0u);
  }
}

// A header may claim only as many codecs as its file justifies: their rotations and sketches are
// rebuilt from the seed, so 60 heads of dense sketches (480 MB) from a 205 KB file are refused,
// though the constructor takes up to 4 GB of them.
TEST(BadInput, CacheHeadersClaimNoMoreCodecStateThanTheFileJustifies) {
  const KVPolicy policy = KVPolicy::parse("qjl:m=4096,sketch=gaussian|window=256");
  KVCache cache(1, 1, 256, policy, 1);
  const auto keys = testutil::gaussian_matrix(200, 256, 1);
  cache.append(0, keys.data(), keys.data(), 200);
  cache.save(temp_path("dense.kvc"));
  const std::string bytes = read(temp_path("dense.kvc"));
  const size_t kv_heads_at = 32;
  const std::string message =
      testutil::error_of([&] { KVCache::load(write("claims.kvc", testutil::resealed(bytes, kv_heads_at, 60))); });
  EXPECT_NE(message.find("is truncated or corrupted"), std::string::npos) << message;
  EXPECT_NE(message.find("480 MB of rotations and sketches"), std::string::npos) << message;
  // The file's bound (256 MB plus 64 bytes per file byte), not the constructor's 4 GB.
  EXPECT_EQ(message.find("beyond 4096 MB"), std::string::npos) << message;
}

TEST(BadInput, RefusedCallsLeaveStateUnchanged) {
  KVCache cache(1, 2, 16, KVPolicy::parse("tq_mse:b=3|window=4|block=4"), 1);
  auto keys = testutil::gaussian_matrix(2 * 20, 16, 5);
  const auto values = testutil::gaussian_matrix(2 * 20, 16, 6);
  cache.append(0, keys.data(), values.data(), 20);
  const size_t bytes = cache.bytes(), tokens = cache.tokens(0);
  keys[30 * 16 + 3] = NAN;  // head 1, token 10
  EXPECT_THROW(cache.append(0, keys.data(), values.data(), 20), Error);
  EXPECT_EQ(cache.bytes(), bytes);
  EXPECT_EQ(cache.tokens(0), tokens);

  FlatIndex index(16, "tq_mse:b=4", Metric::kInnerProduct);
  const auto rows = testutil::gaussian_matrix(10, 16, 7);
  index.add(rows.data(), 5);
  auto bad = rows;
  bad[7 * 16] = INFINITY;
  EXPECT_THROW(index.add(bad.data() + 5 * 16, 5), Error);
  EXPECT_EQ(index.size(), 5u);

  // A save into a folder that does not exist fails and leaves the old file as it was.
  cache.save(temp_path("kept.kvc"));
  const std::string before = read(temp_path("kept.kvc"));
  EXPECT_THROW(cache.save(temp_path("no/such/folder.kvc")), Error);
  EXPECT_EQ(read(temp_path("kept.kvc")), before);
}

struct CliCase {
  const char* name;
  std::string arguments;
  const char* message;
};

TEST(BadInput, CliCasesExitWithStatusTwoAndAClearMessage) {
  const std::string empty = write("empty.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 8), }", 0));
  const std::string queries = write("queries.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 8), }", 16));
  std::filesystem::create_directories(temp_path("folder"));
  const std::string saved = temp_path("never_written.kvc");
  std::filesystem::remove(saved);
  const std::vector<CliCase> cases = {
      {"captured npy of 0 rows (segfault)",
       "attention --keys " + empty + " --values " + empty + " --queries " + queries, "holds no rows"},
      {"bench with 100000 threads (segfault in OpenMP)", "bench attention --threads 100000 --tokens 1000",
       "threads must be in 0..1024"},
      {"index path is a folder", "ann search --index " + temp_path("folder") + " --queries " + queries,
       "is a directory, not a file"},
      {"policy field twice", "attention --synthetic flat --tokens 100 --policies 'fp16|window=8|window=16'",
       "window is given twice"},
      {"center twice", "attention --synthetic flat --tokens 100 --policies 'center:center:tq_mse:b=3'",
       "'center:' is given twice"},
      {"save-cache with two policies",
       "attention --synthetic flat --tokens 100 --policies 'fp16;int8' --save-cache " + saved, "saves one cache"},
      {"cache file missing", "attention --synthetic flat --tokens 100 --cache " + temp_path("missing.kvc"),
       "No such file"},
      {"cache with policies", "attention --synthetic flat --tokens 100 --policies fp16 --cache " + saved,
       "leave out --policies"},
      {"attention threads beyond the limit", "attention --synthetic flat --tokens 100 --threads 5000", "--threads"},
      {"tsv id column that is not integer",
       "distortion --input " + write("fraction_ids.tsv", "1 2 0.5\n3 4 1.5\n") + ":ids", "not an integer"},
  };
  for (const CliCase& c : cases) {
    SCOPED_TRACE(c.name);
    const auto [status, output] = testutil::run_tool(c.arguments);
    EXPECT_EQ(status, 2) << output;
    EXPECT_NE(output.find(c.message), std::string::npos) << output;
  }
  EXPECT_FALSE(std::filesystem::exists(saved));  // refused before any file was written
  const auto [status, output] = testutil::run_tool("--version");
  EXPECT_EQ(status, 0);
  EXPECT_NE(output.find("kvsketch 0."), std::string::npos) << output;
}

}  // namespace
}  // namespace kvsketch

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include <hdf5.h>
#include <zlib.h>

#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"
#include "test_util.hpp"

using namespace kvsketch;

namespace {
std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/kvsketch_" + name; }
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }
}  // namespace

TEST(Io, ReadsBundledSiftAndDropsIdColumnWhenTold) {
  const Matrix m = read_matrix(KVSKETCH_DATA_DIR "/sift-5k.tsv:ids");
  EXPECT_EQ(m.rows, 5000u);
  EXPECT_EQ(m.cols, 128u);
  EXPECT_EQ(m.values[8], 13.0f);
  // Without :ids every column is a value, the ids too.
  const Matrix all = read_matrix(KVSKETCH_DATA_DIR "/sift-5k.tsv");
  EXPECT_EQ(all.cols, 129u);
  EXPECT_EQ(all.values[128], 100001.0f);
}

TEST(Io, TsvKeepsALastColumnThatCountsUnlessToldItHoldsIds) {
  // A feature that happens to count 0, 1, 2, ... is data, not ids.
  write(temp_path("counts.tsv"), "0.5\t0\n0.25\t1\n0.125\t2\n");
  const Matrix m = read_matrix(temp_path("counts.tsv"));
  EXPECT_EQ(m.cols, 2u);
  EXPECT_EQ(m.values[5], 2.0f);
  EXPECT_EQ(read_matrix(temp_path("counts.tsv") + ":ids").cols, 1u);
  write(temp_path("fraction_ids.tsv"), "0.5\t0.5\n");
  EXPECT_THROW(read_matrix(temp_path("fraction_ids.tsv") + ":ids"), Error);
  write(temp_path("one_column.tsv"), "7\n8\n");
  EXPECT_THROW(read_matrix(temp_path("one_column.tsv") + ":ids"), Error);
}

TEST(Io, ReadsFvecsAndNpy) {
  std::string fvecs;
  for (int r = 0; r < 2; ++r) {
    int32_t dim = 3;
    fvecs.append(reinterpret_cast<char*>(&dim), 4);
    for (int c = 0; c < 3; ++c) {
      float v = r * 10.0f + c;
      fvecs.append(reinterpret_cast<char*>(&v), 4);
    }
  }
  write(temp_path("a.fvecs"), fvecs);
  Matrix m = read_matrix(temp_path("a.fvecs"));
  EXPECT_EQ(m.rows, 2u);
  EXPECT_EQ(m.values[4], 11.0f);
  write(temp_path("b.fvecs"), fvecs.substr(0, fvecs.size() - 2));
  EXPECT_THROW(read_matrix(temp_path("b.fvecs")), Error);

  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  header.append(128 - 10 - header.size() - 1, ' ');
  header += '\n';
  std::string npy = std::string("\x93NUMPY\x01\x00", 8);
  npy += static_cast<char>(header.size());
  npy += '\0';
  npy += header;
  npy.append(fvecs.substr(4, 12));
  npy.append(fvecs.substr(20, 12));
  write(temp_path("c.npy"), npy);
  m = read_matrix(temp_path("c.npy"));
  EXPECT_EQ(m.rows, 2u);
  EXPECT_EQ(m.cols, 3u);
  EXPECT_EQ(m.values[5], 12.0f);
  write(temp_path("d.npy"), npy.substr(0, npy.size() - 1));
  EXPECT_THROW(read_matrix(temp_path("d.npy")), Error);
  write(temp_path("e.npy"), "garbage");
  EXPECT_THROW(read_matrix(temp_path("e.npy")), Error);
}

TEST(Io, RejectsMalformedText) {
  write(temp_path("f.tsv"), "1\t2\t3\n4\t5\n");
  EXPECT_THROW(read_matrix(temp_path("f.tsv")), Error);
  write(temp_path("g.tsv"), "1\tx\t3\n");
  EXPECT_THROW(read_matrix(temp_path("g.tsv")), Error);
  EXPECT_THROW(read_matrix(temp_path("missing.tsv")), Error);
  EXPECT_THROW(read_matrix(temp_path("h.bin")), Error);
}

TEST(Io, ReadsIvecsAndBvecs) {
  std::string ivecs, bvecs;
  for (int r = 0; r < 3; ++r) {
    int32_t dim = 2;
    ivecs.append(reinterpret_cast<char*>(&dim), 4);
    bvecs.append(reinterpret_cast<char*>(&dim), 4);
    for (int c = 0; c < 2; ++c) {
      int32_t v = -100 * r + c;
      ivecs.append(reinterpret_cast<char*>(&v), 4);
      bvecs += static_cast<char>(200 + r + c);
    }
  }
  write(temp_path("a.ivecs"), ivecs);
  write(temp_path("a.bvecs"), bvecs);
  const Matrix i = read_matrix(temp_path("a.ivecs"));
  const Matrix b = read_matrix(temp_path("a.bvecs"));
  EXPECT_EQ(i.rows, 3u);
  EXPECT_EQ(i.values[5], -199.0f);
  EXPECT_EQ(b.cols, 2u);
  EXPECT_EQ(b.values[5], 203.0f);
  write(temp_path("b.bvecs"), bvecs.substr(0, bvecs.size() - 1));
  EXPECT_THROW(read_matrix(temp_path("b.bvecs")), Error);
}

TEST(Io, ReadsGzippedIdx) {
  // 2 images of 2 x 3 bytes.
  std::string idx = std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x02\0\0\0\x03", 16);
  for (int i = 0; i < 12; ++i) idx += static_cast<char>(i * 20);
  const std::string path = temp_path("images-idx3-ubyte.gz");
  gzFile file = gzopen(path.c_str(), "wb");
  gzwrite(file, idx.data(), static_cast<unsigned>(idx.size()));
  gzclose(file);
  const Matrix m = read_matrix(path);
  EXPECT_EQ(m.rows, 2u);
  EXPECT_EQ(m.cols, 6u);
  EXPECT_EQ(m.values[7], 140.0f);
  write(temp_path("short-idx3-ubyte"), idx.substr(0, 20));
  EXPECT_THROW(read_matrix(temp_path("short-idx3-ubyte")), Error);
}

TEST(Io, ReadsFashionMnistFromTheDebianPackage) {
  if (!std::ifstream("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is an extra: bash scripts/setup.sh extras";
  const Matrix m = read_matrix("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz");
  EXPECT_EQ(m.rows, 10000u);
  EXPECT_EQ(m.cols, 784u);
  EXPECT_EQ(*std::max_element(m.values.begin(), m.values.end()), 255.0f);
}

TEST(Io, ReadsSafetensorsInEveryFloatType) {
  // keys: F16 [2, 2]; values: BF16 [1, 2, 2] (rows = 2); queries: F32 [1, 2].
  const uint16_t f16[4] = {0x3c00, 0x4000, 0xc000, 0x3800};  // 1, 2, -2, 0.5
  const uint16_t bf16[4] = {0x3f80, 0x4040, 0xbf80, 0x4100};  // 1, 3, -1, 8
  const float f32[2] = {0.25f, -4.0f};
  const std::string header =
      R"({"keys":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]},)"
      R"("values":{"dtype":"BF16","shape":[1,2,2],"data_offsets":[8,16]},)"
      R"("queries":{"dtype":"F32","shape":[1,2],"data_offsets":[16,24]},"__metadata__":{"model":"x"}})";
  std::string file;
  const uint64_t length = header.size();
  file.append(reinterpret_cast<const char*>(&length), 8);
  file += header;
  file.append(reinterpret_cast<const char*>(f16), 8);
  file.append(reinterpret_cast<const char*>(bf16), 8);
  file.append(reinterpret_cast<const char*>(f32), 8);
  const std::string path = temp_path("cache.safetensors");
  write(path, file);
  EXPECT_EQ(read_matrix(path + ":keys").values, (std::vector<float>{1, 2, -2, 0.5f}));
  const Matrix v = read_matrix(path + ":values");
  EXPECT_EQ(v.rows, 2u);
  EXPECT_EQ(v.values, (std::vector<float>{1, 3, -1, 8}));
  EXPECT_EQ(read_matrix(path + ":queries").values, (std::vector<float>{0.25f, -4.0f}));
  auto message = [](const std::string& p) { return testutil::error_of([&] { read_matrix(p); }); };
  EXPECT_NE(message(path).find("holds 3 tensors"), std::string::npos);
  EXPECT_NE(message(path + ":nope").find("no tensor 'nope'"), std::string::npos);
  write(temp_path("short.safetensors"), file.substr(0, file.size() - 4));
  EXPECT_NE(message(temp_path("short.safetensors") + ":queries").find("truncated"), std::string::npos);
  write(temp_path("bad.safetensors"), file.substr(0, 20));
  EXPECT_NE(message(temp_path("bad.safetensors")).find("header"), std::string::npos);
}

// Shapes whose element count (or byte count) wraps around 64 bits: before the check, a wrapped size
// passed the length tests and left rows x cols above the values read (a crafted .npy crashed
// `kvsketch attention`).
TEST(Io, RefusesShapesWhoseSizeOverflows) {
  auto message = [](const std::string& p) { return testutil::error_of([&] { read_matrix(p); }); };
  auto npy = [](const std::string& shape) {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
    header.append(128 - 10 - header.size() - 1, ' ');
    return std::string("\x93NUMPY\x01\x00", 8) + static_cast<char>(header.size() + 1) + '\0' + header + '\n';
  };
  for (const std::string shape :
       {"(4611686018427387904, 128)", "(4294967296, 4294967296)", "(18446744073709551615,)"}) {
    SCOPED_TRACE(shape);
    write(temp_path("huge.npy"), npy(shape));
    EXPECT_NE(message(temp_path("huge.npy")).find("is too large"), std::string::npos);
  }
  write(temp_path("negative.npy"), npy("(-1, 128)"));
  EXPECT_NE(message(temp_path("negative.npy")).find("'-1' is not a non-negative integer"), std::string::npos);

  // IDX: 2^32 - 1 rows of (2^32 - 1)^3 bytes.
  write(temp_path("huge-idx3-ubyte"), std::string("\0\0\x08\x04", 4) + std::string(16, '\xff'));
  EXPECT_NE(message(temp_path("huge-idx3-ubyte")).find("is too large"), std::string::npos);

  // safetensors: 2^62 x 128 F32 is 2^71 bytes, 0 after wrapping, as the empty data claims.
  const std::string header = R"({"keys":{"dtype":"F32","shape":[4611686018427387904,128],"data_offsets":[0,0]}})";
  const uint64_t length = header.size();
  write(temp_path("huge.safetensors"), std::string(reinterpret_cast<const char*>(&length), 8) + header);
  EXPECT_NE(message(temp_path("huge.safetensors")).find("is too large"), std::string::npos);
  // Sizes that are not non-negative integers (1e40 was undefined behaviour in a size_t; -1 wrapped).
  for (const std::string& bad : {std::string("[1e40,128]"), std::string("[-1,128]"), std::string("[2.5,128]")}) {
    const std::string odd = R"({"keys":{"dtype":"F32","shape":)" + bad + R"(,"data_offsets":[0,0]}})";
    const uint64_t odd_length = odd.size();
    write(temp_path("odd.safetensors"), std::string(reinterpret_cast<const char*>(&odd_length), 8) + odd);
    EXPECT_NE(message(temp_path("odd.safetensors")).find("shape holds"), std::string::npos)
        << bad << ": " << message(temp_path("odd.safetensors"));
  }

  // HDF5: a chunked 2^32 x 2^32 dataset with no chunk written (a file of a few KB).
  const std::string path = temp_path("huge.hdf5");
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {hsize_t{1} << 32, hsize_t{1} << 32}, chunk[2] = {1, 1};
  const hid_t space = H5Screate_simple(2, dims, nullptr), layout = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(layout, 2, chunk);
  H5Dclose(H5Dcreate2(file, "train", H5T_IEEE_F32LE, space, H5P_DEFAULT, layout, H5P_DEFAULT));
  H5Pclose(layout);
  H5Sclose(space);
  H5Fclose(file);
  EXPECT_NE(message(path + ":train").find("is too large"), std::string::npos) << message(path + ":train");
}

TEST(Io, ReadsAnnBenchmarksHdf5) {
  const std::string path = temp_path("ann.hdf5");
  const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  const hsize_t dims[2] = {3, 2};
  const hid_t space = H5Screate_simple(2, dims, nullptr);
  const float train[6] = {1, 2, 3, 4, 5, 6};
  const int32_t neighbors[6] = {2, 1, 0, 2, 1, 0};
  hid_t set = H5Dcreate2(file, "train", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, train);
  H5Dclose(set);
  set = H5Dcreate2(file, "neighbors", H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  H5Dwrite(set, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, neighbors);
  H5Dclose(set);
  H5Sclose(space);
  H5Fclose(file);
  const Matrix t = read_matrix(path + ":train");
  EXPECT_EQ(t.rows, 3u);
  EXPECT_EQ(t.values[5], 6.0f);
  EXPECT_EQ(read_matrix(path + ":neighbors").values[3], 2.0f);
  EXPECT_THROW(read_matrix(path + ":test"), Error);
  EXPECT_THROW(read_matrix(path), Error);
  write(temp_path("not.hdf5"), "garbage");
  EXPECT_THROW(read_matrix(temp_path("not.hdf5") + ":train"), Error);
}

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "kvsketch/error.hpp"
#include "kvsketch/io.hpp"

using namespace kvsketch;

namespace {
std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/kvsketch_" + name; }
void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }
}  // namespace

TEST(Io, ReadsBundledSiftAndDropsIdColumn) {
  const Matrix m = read_matrix(KVSKETCH_DATA_DIR "/sift-5k.tsv");
  EXPECT_EQ(m.rows, 5000u);
  EXPECT_EQ(m.cols, 128u);
  EXPECT_EQ(m.values[8], 13.0f);
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

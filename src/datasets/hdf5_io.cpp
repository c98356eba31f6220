// ann-benchmarks HDF5 files: 2-D datasets "train", "test" (float32) and "neighbors" (int32),
// "distances" (float32). Any numeric 2-D (or 1-D) dataset is read, converted to float by HDF5.
#include <hdf5.h>

#include <filesystem>

#include "io/file_bytes.hpp"
#include "datasets/isolated_read.hpp"
#include "datasets/shape_product.hpp"
#include "core/require.hpp"
#include "kvsketch/eval/datasets.hpp"

namespace kvsketch {
namespace {

// Closes an HDF5 handle on scope exit.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

// The read itself, in the process that calls it.
Matrix read_hdf5_here(const std::string& path, const std::string& name) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors come back as return codes, reported by us
  require(H5Fis_hdf5(path.c_str()) > 0, "'{}': cannot open as HDF5 (missing or not an HDF5 file)", path);
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  require(file.get() >= 0, "'{}': cannot open as HDF5", path);
  require(H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) > 0, "'{}' has no dataset '{}'", path, name);
  Handle dataset(H5Dopen2(file.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  require(dataset.get() >= 0, "'{}': '{}' is not a dataset", path, name);
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  const H5T_class_t type_class = H5Tget_class(type.get());
  require(type_class == H5T_FLOAT || type_class == H5T_INTEGER, "'{}': dataset '{}' is not numeric", path, name);
  Handle space(H5Dget_space(dataset.get()), H5Sclose);
  const int rank = H5Sget_simple_extent_ndims(space.get());
  require(rank == 1 || rank == 2, "'{}': dataset '{}' has {} dimensions; expected 1 or 2", path, name, rank);
  hsize_t dims[2] = {1, 1};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  Matrix m;
  m.rows = rank == 2 ? dims[0] : 1;
  m.cols = rank == 2 ? dims[1] : dims[0];
  const size_t count = shape_product(path, {m.rows, m.cols}, sizeof(float));
  require(count > 0, "'{}': dataset '{}' is empty", path, name);
  // The values come from the stored bytes, compressed at most about 1000:1 (deflate's limit):
  // a header that claims more is refused before anything that size is allocated.
  const double stored = static_cast<double>(H5Dget_storage_size(dataset.get()));
  const double claimed = static_cast<double>(count) * static_cast<double>(H5Tget_size(type.get()));
  require(stored <= static_cast<double>(std::filesystem::file_size(path)) && claimed <= 1100.0 * stored,
          "'{}': dataset '{}' claims {} x {} values, but the file stores {} bytes of them (truncated or corrupt "
          "file)",
          path, name, m.rows, m.cols, stored);
  m.values.resize(count);
  require(H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, m.values.data()) >= 0,
          "'{}': cannot read dataset '{}' (truncated or corrupt file)", path, name);
  return m;
}

}  // namespace

Matrix read_hdf5(const std::string& path, const std::string& name) {
  require_readable_file(path, "read");
  // libhdf5 is not hardened against crafted files (it dereferences a failed allocation on some):
  // it runs in a child process, whose crash becomes an Error.
  return read_isolated([&] { return read_hdf5_here(path, name); }, path, "libhdf5");
}

}  // namespace kvsketch

#include "arrays.hpp"

#include <cstring>

#include "kvsketch/half.hpp"

namespace kvsketch::python {

const float* float_like_input(const py::array& array, const char* name, std::vector<py::ssize_t> shape,
                              std::vector<float>& storage, std::vector<size_t>* got) {
  const py::dtype dtype = array.dtype();
  const bool f32 = dtype.kind() == 'f' && dtype.itemsize() == 4;
  const bool f16 = dtype.kind() == 'f' && dtype.itemsize() == 2;
  const bool bf16 = dtype.kind() == 'u' && dtype.itemsize() == 2;  // bfloat16 bits as a uint16 view
  if (!f32 && !f16 && !bf16)
    throw py::type_error(std::string(name) + " must be float32, float16 or bfloat16 (as a uint16 view), got " +
                         std::string(py::str(static_cast<const py::handle&>(dtype))));
  const auto checked = check_shape(array, name, std::move(shape));
  if (got) *got = checked;
  if (f32) return static_cast<const float*>(array.data());
  const size_t count = static_cast<size_t>(array.size());
  const auto* bits = static_cast<const uint16_t*>(array.data());
  storage.resize(count);
  if (f16) {
    for (size_t i = 0; i < count; ++i) storage[i] = half_to_float(bits[i]);
  } else {
    for (size_t i = 0; i < count; ++i) {
      const uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
      std::memcpy(&storage[i], &word, 4);
    }
  }
  return storage.data();
}

KeyValueInput key_value_input(const py::array& keys, const py::array& values, size_t heads, size_t dim) {
  KeyValueInput input;
  std::vector<size_t> shape;
  const auto h = static_cast<py::ssize_t>(heads), d = static_cast<py::ssize_t>(dim);
  input.keys = float_like_input(keys, "keys", {h, -1, d}, input.key_storage, &shape);
  input.tokens = shape[1];
  input.values = float_like_input(values, "values", {h, static_cast<py::ssize_t>(shape[1]), d}, input.value_storage);
  return input;
}

}  // namespace kvsketch::python

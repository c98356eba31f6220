// NumPy arrays in and out of the module: inputs are taken without a copy when they are
// C-contiguous arrays of the expected dtype and shape, and refused otherwise, naming the argument
// (TypeError for a dtype, ValueError for a shape or layout): never a silent copy or a cast.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace kvsketch::python {

namespace py = pybind11;

// "(3, 128)"
inline std::string shape_text(const py::array& array) {
  std::string text = "(";
  for (py::ssize_t d = 0; d < array.ndim(); ++d) text += (d ? ", " : "") + std::to_string(array.shape(d));
  return text + (array.ndim() == 1 ? ",)" : ")");
}

// Checks ndim, C-contiguity and each dimension (-1: any); returns the shape.
inline std::vector<size_t> check_shape(const py::array& array, const char* name, std::vector<py::ssize_t> expected) {
  if (array.ndim() != static_cast<py::ssize_t>(expected.size()))
    throw py::value_error(std::string(name) + " must have " + std::to_string(expected.size()) + " dimensions, got shape " +
                          shape_text(array));
  if (!(array.flags() & py::array::c_style))
    throw py::value_error(std::string(name) + " must be C-contiguous (np.ascontiguousarray), got strides that are not");
  std::vector<size_t> shape;
  for (size_t d = 0; d < expected.size(); ++d) {
    if (expected[d] >= 0 && array.shape(d) != expected[d])
      throw py::value_error(std::string(name) + " has shape " + shape_text(array) + "; dimension " + std::to_string(d) +
                            " must be " + std::to_string(expected[d]));
    shape.push_back(static_cast<size_t>(array.shape(d)));
  }
  return shape;
}

template <typename T>
const T* typed_data(const py::array& array, const char* name, const char* dtype_name) {
  if (array.dtype().kind() != py::dtype::of<T>().kind() || array.itemsize() != static_cast<py::ssize_t>(sizeof(T)))
    throw py::type_error(std::string(name) + " must be a numpy array of dtype " + dtype_name + ", got " +
                         std::string(py::str(static_cast<py::object>(array.dtype()))));
  return static_cast<const T*>(array.data());
}

// A `dtype_name` array of the given shape (-1: any), its data in place.
template <typename T>
const T* typed_input(const py::array& array, const char* name, const char* dtype_name, std::vector<py::ssize_t> shape,
                     std::vector<size_t>* got = nullptr) {
  const T* data = typed_data<T>(array, name, dtype_name);
  const auto checked = check_shape(array, name, std::move(shape));
  if (got) *got = checked;
  return data;
}

inline const float* float32_input(const py::array& array, const char* name, std::vector<py::ssize_t> shape,
                                  std::vector<size_t>* got = nullptr) {
  return typed_input<float>(array, name, "float32", std::move(shape), got);
}

inline const uint8_t* uint8_input(const py::array& array, const char* name, std::vector<py::ssize_t> shape,
                                  std::vector<size_t>* got = nullptr) {
  return typed_input<uint8_t>(array, name, "uint8", std::move(shape), got);
}

// Float32 data of a float32, float16 or bfloat16 (given as a uint16 view) array: in place for
// float32, converted into `storage` otherwise.
const float* float_like_input(const py::array& array, const char* name, std::vector<py::ssize_t> shape,
                              std::vector<float>& storage, std::vector<size_t>* got = nullptr);

// Keys and values of an append, (heads, tokens, dim) each, read as float_like_input reads them.
struct KeyValueInput {
  const float* keys;
  const float* values;
  size_t tokens;
  std::vector<float> key_storage, value_storage;  // where fp16 or bf16 were widened
};
KeyValueInput key_value_input(const py::array& keys, const py::array& values, size_t heads, size_t dim);

template <typename T>
py::array_t<T> new_array(std::vector<py::ssize_t> shape) {
  return py::array_t<T>(shape);
}

// (output, lse) of an attention step over queries of `shape` (rows, q_heads, head_dim): the
// arrays made, then step(output, lse) run without the GIL.
template <typename Step>
py::tuple attention_outputs(const std::vector<size_t>& shape, Step&& step) {
  auto output = new_array<float>({static_cast<py::ssize_t>(shape[0]), static_cast<py::ssize_t>(shape[1]),
                                  static_cast<py::ssize_t>(shape[2])});
  auto lse = new_array<float>({static_cast<py::ssize_t>(shape[0]), static_cast<py::ssize_t>(shape[1])});
  float* out = output.mutable_data();
  float* l = lse.mutable_data();
  {
    py::gil_scoped_release release;
    step(out, l);
  }
  return py::make_tuple(output, lse);
}

}  // namespace kvsketch::python

// The kvsketch Python module: codecs, the paged KV cache, the attention merge and the index, on
// NumPy arrays. Every call that computes releases the GIL; the library's errors are
// kvsketch.Error (a ValueError).
#include <pybind11/pybind11.h>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kvsketch/attention.hpp"
#include "kvsketch/error.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_kvsketch, module) {
  module.doc() = "kvsketch: compressed KV caches and vectors, attention and search from the codes.";
  py::register_exception<kvsketch::Error>(module, "Error", PyExc_ValueError);
  kvsketch::python::bind_codec(module);
  kvsketch::python::bind_cache(module);
  kvsketch::python::bind_index(module);
  kvsketch::python::bind_selection(module);
  module.def(
      "merge_attention",
      [](const py::array& output_a, const py::array& lse_a, const py::array& output_b, const py::array& lse_b) {
        using namespace kvsketch::python;
        std::vector<size_t> shape;
        const float* a = float32_input(output_a, "output_a", {-1, -1}, &shape);
        const auto heads = static_cast<py::ssize_t>(shape[0]), dim = static_cast<py::ssize_t>(shape[1]);
        const float* la = float32_input(lse_a, "lse_a", {heads});
        const float* b = float32_input(output_b, "output_b", {heads, dim});
        const float* lb = float32_input(lse_b, "lse_b", {heads});
        auto output = new_array<float>({heads, dim});
        auto lse = new_array<float>({heads});
        kvsketch::merge_attention_states(a, la, b, lb, shape[0], shape[1], output.mutable_data(), lse.mutable_data());
        return py::make_tuple(output, lse);
      },
      py::arg("output_a"), py::arg("lse_a"), py::arg("output_b"), py::arg("lse_b"),
      "Merges two partial attention results (outputs (heads, dim), lse (heads,)) by log-sum-exp.");
}

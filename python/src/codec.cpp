// kvsketch.Codec: a VectorCodec on NumPy arrays.
#include <memory>
#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kvsketch/codec.hpp"

namespace kvsketch::python {
namespace {

// The caller's codes (n x code_bytes) as the codec's buffer.
CodeBuffer buffer_of(const VectorCodec& codec, const py::array& codes, size_t* rows) {
  std::vector<size_t> shape;
  const uint8_t* data = uint8_input(codes, "codes", {-1, static_cast<py::ssize_t>(codec.code_bytes())}, &shape);
  CodeBuffer buffer(codec.code_bytes());
  buffer.data().assign(data, data + shape[0] * codec.code_bytes());
  *rows = shape[0];
  return buffer;
}

}  // namespace

void bind_codec(py::module_& module) {
  py::class_<VectorCodec, std::shared_ptr<VectorCodec>>(module, "Codec", R"(A vector codec from a spec string.

    Codec("tq_mse:b=3", 128, seed=0): see the README for the spec grammar. Rows are float32
    arrays (n, dim); codes are uint8 arrays (n, code_bytes).)")
      .def(py::init([](const std::string& spec, size_t dim, uint64_t seed) {
             return std::shared_ptr<VectorCodec>(make_codec(spec, dim, seed));
           }),
           py::arg("spec"), py::arg("dim"), py::arg("seed") = 0)
      .def_property_readonly("dim", &VectorCodec::dim)
      .def_property_readonly("code_bytes", &VectorCodec::code_bytes, "Bytes per row, norms and scales included.")
      .def_property_readonly("spec", &VectorCodec::spec, "The canonical spec (seed included).")
      .def(
          "encode",
          [](const VectorCodec& codec, const py::array& x) {
            std::vector<size_t> shape;
            const float* rows = float32_input(x, "x", {-1, static_cast<py::ssize_t>(codec.dim())}, &shape);
            CodeBuffer buffer(codec.code_bytes());
            {
              py::gil_scoped_release release;
              codec.encode(rows, shape[0], buffer);
            }
            auto codes = new_array<uint8_t>({static_cast<py::ssize_t>(shape[0]), static_cast<py::ssize_t>(codec.code_bytes())});
            std::memcpy(codes.mutable_data(), buffer.data().data(), buffer.bytes());
            return codes;
          },
          py::arg("x"), "Codes of the rows of x (n, dim) float32: (n, code_bytes) uint8.")
      .def(
          "decode",
          [](const VectorCodec& codec, const py::array& codes) {
            size_t n = 0;
            const CodeBuffer buffer = buffer_of(codec, codes, &n);
            auto out = new_array<float>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(codec.dim())});
            float* data = out.mutable_data();
            py::gil_scoped_release release;
            codec.decode(buffer, 0, n, data);
            return out;
          },
          py::arg("codes"), "The rows the codes decode to: (n, dim) float32.")
      .def(
          "scores",
          [](const VectorCodec& codec, const py::array& query, const py::array& codes) {
            const float* q = float32_input(query, "query", {static_cast<py::ssize_t>(codec.dim())});
            size_t n = 0;
            const CodeBuffer buffer = buffer_of(codec, codes, &n);
            auto out = new_array<float>({static_cast<py::ssize_t>(n)});
            float* data = out.mutable_data();
            py::gil_scoped_release release;
            const auto prepared = codec.prepare(q);
            codec.scores(*prepared, buffer, 0, n, data);
            return out;
          },
          py::arg("query"), py::arg("codes"), "<query, row i> estimated from the codes: (n,) float32.")
      .def(
          "accumulate",
          [](const VectorCodec& codec, const py::array& weights, const py::array& codes) {
            size_t n = 0;
            const CodeBuffer buffer = buffer_of(codec, codes, &n);
            const float* w = float32_input(weights, "weights", {static_cast<py::ssize_t>(n)});
            auto out = new_array<float>({static_cast<py::ssize_t>(codec.dim())});
            float* data = out.mutable_data();
            std::fill(data, data + codec.dim(), 0.0f);
            py::gil_scoped_release release;
            codec.accumulate(w, buffer, 0, n, data);
            return out;
          },
          py::arg("weights"), py::arg("codes"), "sum_i weights[i] * row i decoded: (dim,) float32.")
      .def("__repr__", [](const VectorCodec& codec) {
        return "kvsketch.Codec('" + codec.spec() + "', " + std::to_string(codec.dim()) + ")";
      });
}

}  // namespace kvsketch::python

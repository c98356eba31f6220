// kvsketch.KVCache: the paged multi-sequence cache on NumPy arrays.
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kvsketch/calibration.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/paged_cache.hpp"

namespace kvsketch::python {
namespace {

AttentionOptions options_of(int threads, bool integer) {
  if (threads < 0) throw py::value_error("threads must be >= 0 (0: all), got " + std::to_string(threads));
  AttentionOptions options;
  options.threads = threads;
  options.arithmetic = integer ? Arithmetic::kInteger : Arithmetic::kFloat;
  return options;
}

}  // namespace

void bind_cache(py::module_& module) {
  py::class_<Calibration>(module, "Calibration",
                          "Codec fits per layer and KV head (outlier channels, means, bases), shared by all sequences.")
      .def(py::init([](size_t layers, size_t kv_heads, size_t head_dim, const std::string& policy, uint64_t seed) {
             return Calibration(layers, kv_heads, head_dim, KVPolicy::parse(policy), seed);
           }),
           py::arg("layers"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("policy"), py::arg("seed") = 0)
      .def(
          "fit",
          [](Calibration& calibration, size_t layer, const py::array& keys, const py::array& values) {
            const auto heads = static_cast<py::ssize_t>(calibration.kv_heads()),
                       dim = static_cast<py::ssize_t>(calibration.head_dim());
            std::vector<size_t> shape;
            const float* k = float32_input(keys, "keys", {heads, -1, dim}, &shape);
            const float* v = float32_input(values, "values", {heads, static_cast<py::ssize_t>(shape[1]), dim});
            py::gil_scoped_release release;
            calibration.fit(layer, k, v, shape[1]);
          },
          py::arg("layer"), py::arg("keys"), py::arg("values"),
          "Fits a layer from a sample: keys and values (kv_heads, tokens, head_dim) float32.")
      .def_property_readonly("complete", &Calibration::complete)
      .def("save", &Calibration::save, py::arg("path"))
      .def_static("load", &Calibration::load, py::arg("path"));

  py::class_<PagedKVCache>(module, "KVCache", R"(The paged multi-sequence KV cache.

    KVCache(layers, kv_heads, head_dim, policy="tq_prod:b=3|tq_mse:b=3", seed=0), or
    KVCache(calibration). Keys and values are (kv_heads, tokens, head_dim) arrays of float32,
    float16 or bfloat16 (as a uint16 view); queries (batch, q_heads, head_dim) float32.)")
      .def(py::init([](size_t layers, size_t kv_heads, size_t head_dim, const std::string& policy, uint64_t seed) {
             return PagedKVCache(layers, kv_heads, head_dim, KVPolicy::parse(policy), seed);
           }),
           py::arg("layers"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("policy") = "tq_prod:b=3|tq_mse:b=3",
           py::arg("seed") = 0)
      .def(py::init([](const Calibration& calibration) { return PagedKVCache(calibration); }), py::arg("calibration"))
      .def_property_readonly("layers", &PagedKVCache::layers)
      .def_property_readonly("kv_heads", &PagedKVCache::kv_heads)
      .def_property_readonly("head_dim", &PagedKVCache::head_dim)
      .def_property_readonly("policy", [](const PagedKVCache& cache) { return cache.policy().spec(); })
      .def_property_readonly("calibration", &PagedKVCache::calibration)
      .def("add_sequence", &PagedKVCache::add_sequence)
      .def("fork", &PagedKVCache::fork, py::arg("sequence"), "A new sequence sharing every sealed page.")
      .def("truncate", &PagedKVCache::truncate, py::arg("sequence"), py::arg("tokens"),
           "Keeps the first `tokens` tokens (policy field rollback=N).")
      .def("remove_sequence", &PagedKVCache::remove_sequence, py::arg("sequence"))
      .def("__contains__", &PagedKVCache::contains)
      .def("sequences", &PagedKVCache::sequences)
      .def("tokens", &PagedKVCache::tokens, py::arg("sequence"), py::arg("layer") = 0)
      .def(
          "read",
          [](const PagedKVCache& cache, SequenceId sequence, size_t layer, size_t first, std::optional<size_t> count) {
            const size_t tokens = cache.tokens(sequence, layer);
            // Past the end, the library's read names the range and the length.
            const size_t n = count.value_or(first <= tokens ? tokens - first : 0);
            const std::vector<py::ssize_t> shape{static_cast<py::ssize_t>(cache.kv_heads()), static_cast<py::ssize_t>(n),
                                                 static_cast<py::ssize_t>(cache.head_dim())};
            auto keys = new_array<float>(shape), values = new_array<float>(shape);
            float* k = keys.mutable_data();
            float* v = values.mutable_data();
            {
              py::gil_scoped_release release;
              cache.read(sequence, layer, first, n, k, v);
            }
            return py::make_tuple(keys, values);
          },
          py::arg("sequence"), py::arg("layer"), py::arg("first") = 0, py::arg("count") = py::none(),
          "Tokens [first, first + count) (default: to the end) as the cache holds them, decoded: "
          "(keys, values), each (kv_heads, count, head_dim) float32.")
      .def(
          "append",
          [](PagedKVCache& cache, uint64_t sequence, size_t layer, const py::array& keys, const py::array& values) {
            const KeyValueInput input = key_value_input(keys, values, cache.kv_heads(), cache.head_dim());
            py::gil_scoped_release release;
            cache.append(sequence, layer, input.keys, input.values, input.tokens);
          },
          py::arg("sequence"), py::arg("layer"), py::arg("keys"), py::arg("values"))
      .def(
          "attention",
          [](const PagedKVCache& cache, size_t layer, const std::vector<SequenceId>& sequences, const py::array& queries,
             int threads, bool integer) {
            std::vector<size_t> shape;
            const float* q = float32_input(
                queries, "queries", {static_cast<py::ssize_t>(sequences.size()), -1, static_cast<py::ssize_t>(cache.head_dim())},
                &shape);
            const AttentionOptions options = options_of(threads, integer);
            return attention_outputs(shape, [&](float* out, float* lse) {
              cache.decode(layer, sequences.data(), sequences.size(), q, shape[1], out, lse, options);
            });
          },
          py::arg("layer"), py::arg("sequences"), py::arg("queries"), py::arg("threads") = 0,
          py::arg("integer_arithmetic") = true,
          "One decode step for a batch: queries (batch, q_heads, head_dim) float32 -> (output, lse).")
      .def(
          "prefill",
          [](const PagedKVCache& cache, size_t layer, SequenceId sequence, const py::array& queries, int threads) {
            std::vector<size_t> shape;
            const float* q = float32_input(queries, "queries", {-1, -1, static_cast<py::ssize_t>(cache.head_dim())}, &shape);
            const AttentionOptions options = options_of(threads, true);
            return attention_outputs(
                shape, [&](float* out, float* lse) { cache.prefill(layer, sequence, shape[0], q, shape[1], out, lse, options); });
          },
          py::arg("layer"), py::arg("sequence"), py::arg("queries"), py::arg("threads") = 0,
          "The last chunk tokens as queries (chunk, q_heads, head_dim), causally -> (output, lse).")
      .def(
          "attend_chunk",
          [](const PagedKVCache& cache, size_t layer, SequenceId sequence, const py::array& queries,
             const py::array& keys, const py::array& values, int threads) {
            std::vector<size_t> shape;
            const float* q = float32_input(queries, "queries", {-1, -1, static_cast<py::ssize_t>(cache.head_dim())}, &shape);
            const KeyValueInput input = key_value_input(keys, values, cache.kv_heads(), cache.head_dim());
            if (input.tokens != shape[0])
              throw py::value_error("attend_chunk: " + std::to_string(shape[0]) + " queries, but keys and values of " +
                                    std::to_string(input.tokens) + " tokens");
            const AttentionOptions options = options_of(threads, true);
            return attention_outputs(shape, [&](float* out, float* lse) {
              cache.attend_chunk(layer, sequence, shape[0], q, shape[1], input.keys, input.values, out, lse, options);
            });
          },
          py::arg("layer"), py::arg("sequence"), py::arg("queries"), py::arg("keys"), py::arg("values"),
          py::arg("threads") = 0,
          "Before appending a chunk: its queries (chunk, q_heads, head_dim) attend the cached past and the "
          "chunk's own keys and values (kv_heads, chunk, head_dim) exactly, causally -> (output, lse).")
      .def(
          "_native_attention_seconds",
          [](const PagedKVCache& cache, size_t layer, const std::vector<SequenceId>& sequences, const py::array& queries,
             int repetitions, int threads) {
            std::vector<size_t> shape;
            const float* q = float32_input(
                queries, "queries", {static_cast<py::ssize_t>(sequences.size()), -1, static_cast<py::ssize_t>(cache.head_dim())},
                &shape);
            std::vector<float> output(shape[0] * shape[1] * shape[2]), lse(shape[0] * shape[1]);
            std::vector<double> seconds;
            const AttentionOptions options = options_of(threads, true);
            py::gil_scoped_release release;
            for (int r = 0; r < repetitions; ++r) {
              const auto start = std::chrono::steady_clock::now();
              cache.decode(layer, sequences.data(), sequences.size(), q, shape[1], output.data(), lse.data(), options);
              seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
            }
            std::sort(seconds.begin(), seconds.end());
            return seconds.empty() ? 0.0 : seconds[seconds.size() / 2];
          },
          py::arg("layer"), py::arg("sequences"), py::arg("queries"), py::arg("repetitions") = 100, py::arg("threads") = 0,
          "For benchmarks: the median seconds of the C++ decode call that attention() makes, timed in C++.")
      .def("bytes", &PagedKVCache::bytes, "Bytes held: shared pages once, sinks, windows, calibration.")
      .def("allocated_bytes", &PagedKVCache::allocated_bytes, "Bytes allocated, capacity included.")
      .def("sequence_bytes", &PagedKVCache::sequence_bytes, py::arg("sequence"))
      .def("save", &PagedKVCache::save, py::arg("path"))
      .def_static("load", &PagedKVCache::load, py::arg("path"))
      .def("save_sequence", &PagedKVCache::save_sequence, py::arg("sequence"), py::arg("path"))
      .def("load_sequence", &PagedKVCache::load_sequence, py::arg("path"));
}

}  // namespace kvsketch::python

// kvsketch.SelectionCache and kvsketch.PagedSelectionCache: one sequence, or the sequences of a
// paged cache, attended through token selectors (MagicPIG, BalanceKV, top-k, uniform) over their
// compressed bodies, on NumPy arrays.
#include <pybind11/stl.h>

#include <set>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kvsketch/kv_policy.hpp"
#include "kvsketch/paged_selection_cache.hpp"
#include "kvsketch/selection_cache.hpp"

namespace kvsketch::python {

void bind_selection(py::module_& module) {
  py::class_<SelectionCache>(module, "SelectionCache", R"(One sequence's KV cache whose compressed body is attended through a token selector.

    SelectionCache(layers, kv_heads, head_dim, policy, selector, dense_layers=(), seed=0)
    selector: "magicpig:K=10,L=150", "balancekv:ratio=0.25", "topk:budget=0.1", "uniform:budget=0.1", ...
    Sinks and the fp16 window are attended exactly; dense_layers are attended densely.)")
      .def(py::init([](size_t layers, size_t kv_heads, size_t head_dim, const std::string& policy,
                       const std::string& selector, const std::set<size_t>& dense_layers, uint64_t seed) {
             return SelectionCache(layers, kv_heads, head_dim, KVPolicy::parse(policy), selector, dense_layers, seed);
           }),
           py::arg("layers"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("policy"), py::arg("selector"),
           py::arg("dense_layers") = std::set<size_t>{}, py::arg("seed") = 0)
      .def(
          "append",
          [](SelectionCache& cache, size_t layer, const py::array& keys, const py::array& values) {
            const KeyValueInput input = key_value_input(keys, values, cache.cache().kv_heads(), cache.cache().head_dim());
            py::gil_scoped_release release;
            cache.append(layer, input.keys, input.values, input.tokens);
          },
          py::arg("layer"), py::arg("keys"), py::arg("values"),
          "Appends tokens to a layer: keys and values (kv_heads, tokens, head_dim), float32, float16 or bf16 as uint16.")
      .def(
          "attention",
          [](const SelectionCache& cache, size_t layer, const py::array& queries, uint64_t draw) {
            std::vector<size_t> shape;
            const float* q =
                float32_input(queries, "queries", {-1, static_cast<py::ssize_t>(cache.cache().head_dim())}, &shape);
            AttentionResult result;
            {
              py::gil_scoped_release release;
              result = cache.attention(layer, q, shape[0], draw);
            }
            auto output = new_array<float>({static_cast<py::ssize_t>(result.heads), static_cast<py::ssize_t>(result.dim)});
            auto lse = new_array<float>({static_cast<py::ssize_t>(result.heads)});
            std::copy(result.output.begin(), result.output.end(), output.mutable_data());
            std::copy(result.lse.begin(), result.lse.end(), lse.mutable_data());
            return py::make_tuple(output, lse);
          },
          py::arg("layer"), py::arg("queries"), py::arg("draw") = 0,
          "All query heads of a layer, queries (q_heads, head_dim) float32 -> (output, lse); draw numbers the step "
          "for sampling selectors.")
      .def("tokens", [](const SelectionCache& cache, size_t layer) { return cache.cache().tokens(layer); },
           py::arg("layer") = 0)
      .def("bytes", [](const SelectionCache& cache) { return cache.cache().bytes(); },
           "Bytes of the KV cache (codes, fp16 sinks and window, calibration).")
      .def("index_bytes", &SelectionCache::index_bytes, "Bytes of the selectors' indexes, every layer and head.")
      .def("dense", &SelectionCache::dense, py::arg("layer"));

  py::class_<PagedSelectionCache>(module, "PagedSelectionCache", R"(Sequences of a paged KV cache, each attended through its own token selectors.

    PagedSelectionCache(layers, kv_heads, head_dim, policy, selector, dense_layers=(), seed=0)
    Sequences as KVCache's: add_sequence, fork (copies the selectors), truncate, remove_sequence.
    A selector indexes whole blocks before the tokens the policy's rollback keeps in fp16; the rest
    of the body, the sinks and the window are attended exactly.)")
      .def(py::init([](size_t layers, size_t kv_heads, size_t head_dim, const std::string& policy,
                       const std::string& selector, const std::set<size_t>& dense_layers, uint64_t seed) {
             return PagedSelectionCache(layers, kv_heads, head_dim, KVPolicy::parse(policy), selector, dense_layers,
                                        seed);
           }),
           py::arg("layers"), py::arg("kv_heads"), py::arg("head_dim"), py::arg("policy"), py::arg("selector"),
           py::arg("dense_layers") = std::set<size_t>{}, py::arg("seed") = 0)
      .def("add_sequence", &PagedSelectionCache::add_sequence)
      .def("fork", &PagedSelectionCache::fork, py::arg("sequence"))
      .def("truncate", &PagedSelectionCache::truncate, py::arg("sequence"), py::arg("tokens"))
      .def("remove_sequence", &PagedSelectionCache::remove_sequence, py::arg("sequence"))
      .def(
          "append",
          [](PagedSelectionCache& cache, uint64_t sequence, size_t layer, const py::array& keys, const py::array& values) {
            const KeyValueInput input = key_value_input(keys, values, cache.cache().kv_heads(), cache.cache().head_dim());
            py::gil_scoped_release release;
            cache.append(sequence, layer, input.keys, input.values, input.tokens);
          },
          py::arg("sequence"), py::arg("layer"), py::arg("keys"), py::arg("values"),
          "Appends tokens to a layer of a sequence: keys and values (kv_heads, tokens, head_dim).")
      .def(
          "attention",
          [](const PagedSelectionCache& cache, size_t layer, const std::vector<SequenceId>& sequences,
             const py::array& queries, uint64_t draw) {
            std::vector<size_t> shape;
            const float* q = float32_input(queries, "queries",
                                           {static_cast<py::ssize_t>(sequences.size()), -1,
                                            static_cast<py::ssize_t>(cache.cache().head_dim())},
                                           &shape);
            return attention_outputs(shape, [&](float* out, float* lse) {
              cache.attention(layer, sequences.data(), sequences.size(), q, shape[1], out, lse, draw);
            });
          },
          py::arg("layer"), py::arg("sequences"), py::arg("queries"), py::arg("draw") = 0,
          "One decode step for a batch: queries (batch, q_heads, head_dim) float32 -> (output, lse).")
      .def("tokens", [](const PagedSelectionCache& cache, SequenceId sequence, size_t layer) {
             return cache.cache().tokens(sequence, layer);
           }, py::arg("sequence"), py::arg("layer") = 0)
      .def("indexed_tokens", &PagedSelectionCache::indexed_tokens, py::arg("sequence"), py::arg("layer") = 0,
           "Body tokens of the layer that the sequence's selectors index.")
      .def("bytes", [](const PagedSelectionCache& cache) { return cache.cache().bytes(); },
           "Bytes of the KV cache (shared pages once, fp16 sinks and windows, calibration).")
      .def("index_bytes", py::overload_cast<>(&PagedSelectionCache::index_bytes, py::const_),
           "Bytes of the selectors' indexes, every sequence.")
      .def("sequence_index_bytes", py::overload_cast<SequenceId>(&PagedSelectionCache::index_bytes, py::const_),
           py::arg("sequence"), "Bytes of one sequence's selectors.")
      .def("dense", &PagedSelectionCache::dense, py::arg("layer"));
}

}  // namespace kvsketch::python

// kvsketch.Index: the flat vector index with FAISS's verbs.
#include <pybind11/stl.h>

#include <string>

#include "arrays.hpp"
#include "bindings.hpp"
#include "kvsketch/ann.hpp"
#include "kvsketch/ivf_index.hpp"

namespace kvsketch::python {

namespace {

// The verbs FlatIndex and IvfIndex share, on NumPy arrays.
template <typename Index>
void add_rows(Index& index, const py::array& x, const py::array* ids) {
  std::vector<size_t> shape;
  const float* rows = float32_input(x, "x", {-1, static_cast<py::ssize_t>(index.dim())}, &shape);
  const int64_t* id = nullptr;
  if (ids) {
    id = typed_data<int64_t>(*ids, "ids", "int64");
    check_shape(*ids, "ids", {static_cast<py::ssize_t>(shape[0])});
  }
  py::gil_scoped_release release;
  index.add(rows, shape[0], id);
}

// (D, I) of search(queries, nq) as NumPy arrays (nq, k).
template <typename Index, typename Search>
py::tuple search_rows(const Index& index, const py::array& queries, size_t k, Search&& search) {
  std::vector<size_t> shape;
  const float* q = float32_input(queries, "queries", {-1, static_cast<py::ssize_t>(index.dim())}, &shape);
  Neighbors found;
  {
    py::gil_scoped_release release;
    found = search(q, shape[0]);
  }
  auto scores = new_array<float>({static_cast<py::ssize_t>(shape[0]), static_cast<py::ssize_t>(k)});
  auto ids = new_array<int64_t>({static_cast<py::ssize_t>(shape[0]), static_cast<py::ssize_t>(k)});
  std::copy(found.scores.begin(), found.scores.end(), scores.mutable_data());
  std::copy(found.ids.begin(), found.ids.end(), ids.mutable_data());
  return py::make_tuple(scores, ids);
}

template <typename Index>
size_t remove_rows(Index& index, const py::array& ids) {
  const int64_t* id = typed_data<int64_t>(ids, "ids", "int64");
  const std::vector<size_t> shape = check_shape(ids, "ids", {-1});
  return index.remove(id, shape[0]);
}

}  // namespace

void bind_index(py::module_& module) {
  py::class_<FlatIndex>(module, "Index", R"(A flat index over compressed vectors.

    Index(dim, codec="tq_pca:b=4", metric="ip", seed=0): metric "ip", "cosine" or "l2". Vectors are
    (n, dim) float32 arrays; ids int64.)")
      .def(py::init([](size_t dim, const std::string& codec, const std::string& metric, uint64_t seed, int threads) {
             if (threads < 0) throw py::value_error("threads must be >= 0 (0: all), got " + std::to_string(threads));
             FlatIndexOptions options;
             options.codec = codec;
             options.metric = parse_metric(metric);
             options.seed = seed;
             options.threads = threads;
             return FlatIndex(dim, options);
           }),
           py::arg("dim"), py::arg("codec") = "tq_pca:b=4", py::arg("metric") = "ip", py::arg("seed") = 0,
           py::arg("threads") = 0)
      .def_property_readonly("d", &FlatIndex::dim)
      .def_property_readonly("ntotal", &FlatIndex::size)
      .def(
          "add", [](FlatIndex& index, const py::array& x) { add_rows(index, x, nullptr); }, py::arg("x"))
      .def(
          "add_with_ids", [](FlatIndex& index, const py::array& x, const py::array& ids) { add_rows(index, x, &ids); },
          py::arg("x"), py::arg("ids"))
      .def(
          "search",
          [](const FlatIndex& index, const py::array& queries, size_t k) {
            return search_rows(index, queries, k, [&](const float* q, size_t nq) { return index.search(q, nq, k); });
          },
          py::arg("queries"), py::arg("k"), "(D, I): similarities and ids (nq, k), best first.")
      .def(
          "remove_ids", [](FlatIndex& index, const py::array& ids) { return remove_rows(index, ids); }, py::arg("ids"),
          "Removes these ids; returns how many were present.")
      .def("bytes", &FlatIndex::bytes)
      .def("save", &FlatIndex::save, py::arg("path"))
      .def_static("load", &FlatIndex::load, py::arg("path"));

  py::class_<IvfIndex>(module, "IvfIndex", R"(An inverted-file index over compressed vectors.

    IvfIndex(dim, "ivf:nlist=1024,nprobe=32,metric=ip|tq_mse:b=4,rescale=1", threads=0): train on a
    sample, then add; search scans the nprobe lists nearest each query.)")
      .def(py::init([](size_t dim, const std::string& factory, int threads) {
             if (threads < 0) throw py::value_error("threads must be >= 0 (0: all), got " + std::to_string(threads));
             IvfIndexOptions options = IvfIndexOptions::parse(factory);
             options.threads = threads;
             return IvfIndex(dim, options);
           }),
           py::arg("dim"), py::arg("factory") = "ivf:nlist=256,nprobe=16|tq_mse:b=4,rescale=1", py::arg("threads") = 0)
      .def_property_readonly("d", &IvfIndex::dim)
      .def_property_readonly("ntotal", &IvfIndex::size)
      .def_property_readonly("is_trained", &IvfIndex::trained)
      .def_property_readonly("factory", [](const IvfIndex& index) { return index.options().factory(); })
      .def("list_sizes", &IvfIndex::list_sizes)
      .def(
          "train",
          [](IvfIndex& index, const py::array& x) {
            std::vector<size_t> shape;
            const float* rows = float32_input(x, "x", {-1, static_cast<py::ssize_t>(index.dim())}, &shape);
            py::gil_scoped_release release;
            index.train(rows, shape[0]);
          },
          py::arg("x"))
      .def(
          "add", [](IvfIndex& index, const py::array& x) { add_rows(index, x, nullptr); }, py::arg("x"))
      .def(
          "add_with_ids", [](IvfIndex& index, const py::array& x, const py::array& ids) { add_rows(index, x, &ids); },
          py::arg("x"), py::arg("ids"))
      .def(
          "search",
          [](const IvfIndex& index, const py::array& queries, size_t k, size_t nprobe) {
            return search_rows(index, queries, k,
                               [&](const float* q, size_t nq) { return index.search(q, nq, k, nprobe); });
          },
          py::arg("queries"), py::arg("k"), py::arg("nprobe") = 0,
          "(D, I) over the nprobe lists nearest each query (0: the factory's nprobe).")
      .def(
          "remove_ids", [](IvfIndex& index, const py::array& ids) { return remove_rows(index, ids); }, py::arg("ids"))
      .def(
          "first_present",
          [](const IvfIndex& index, const py::array& ids) {
            const int64_t* id = typed_data<int64_t>(ids, "ids", "int64");
            const std::vector<size_t> shape = check_shape(ids, "ids", {-1});
            return index.first_present(id, shape[0]);
          },
          py::arg("ids"), "The first of these ids that is stored, or -1 when none is.")
      .def("bytes", &IvfIndex::bytes)
      .def("mapped_bytes", &IvfIndex::mapped_bytes, "Of bytes(), those used in place in a mapped file.")
      .def("save", &IvfIndex::save, py::arg("path"))
      .def_static("load", &IvfIndex::load, py::arg("path"))
      .def_static("map", &IvfIndex::map, py::arg("path"),
                  "The file mapped read-only: lists searched in its pages, copied when they change.")
      .def(
          "to_bytes",
          [](const IvfIndex& index) {
            const std::vector<uint8_t> image = index.to_bytes();
            return py::bytes(reinterpret_cast<const char*>(image.data()), image.size());
          },
          "The index's checksummed file image (for sending a trained index to shards).")
      .def_static(
          "from_bytes",
          [](const py::bytes& image) {
            const std::string text = image;
            return IvfIndex::from_bytes(std::vector<uint8_t>(text.begin(), text.end()));
          },
          py::arg("image"))
      .def(
          "candidates",
          [](const IvfIndex& index, const py::array& queries, size_t k, size_t nprobe) {
            std::vector<size_t> shape;
            const float* q = float32_input(queries, "queries", {-1, static_cast<py::ssize_t>(index.dim())}, &shape);
            IvfCandidates found;
            {
              py::gil_scoped_release release;
              found = index.candidates(q, shape[0], k, nprobe);
            }
            const std::vector<py::ssize_t> dims = {static_cast<py::ssize_t>(found.queries),
                                                   static_cast<py::ssize_t>(found.per_query)};
            const auto array = [&](const auto& values) {
              auto out = new_array<typename std::decay_t<decltype(values)>::value_type>(dims);
              std::copy(values.begin(), values.end(), out.mutable_data());
              return out;
            };
            py::dict part;
            part["k"] = found.k;
            part["scan"] = array(found.scan);
            part["code"] = array(found.code);
            part["refined"] = array(found.refined);
            part["ids"] = array(found.ids);
            return part;
          },
          py::arg("queries"), py::arg("k"), py::arg("nprobe") = 0,
          "This shard's part of a search: a dict of arrays (nq, per_query) for merge().")
      .def(
          "merge",
          [](const IvfIndex& index, const py::list& parts) {
            std::vector<IvfCandidates> all;
            for (const py::handle& item : parts) {
              const py::dict part = py::reinterpret_borrow<py::dict>(item);
              IvfCandidates c;
              c.k = part["k"].cast<size_t>();
              const py::array ids = part["ids"].cast<py::array>();
              const std::vector<size_t> shape = check_shape(ids, "ids", {-1, -1});
              c.queries = shape[0];
              c.per_query = shape[1];
              const int64_t* id = typed_data<int64_t>(ids, "ids", "int64");
              c.ids.assign(id, id + c.queries * c.per_query);
              for (const auto& [name, out] : {std::pair<const char*, std::vector<float>*>{"scan", &c.scan},
                                              {"code", &c.code}, {"refined", &c.refined}}) {
                const py::array values = part[name].cast<py::array>();
                check_shape(values, name, {static_cast<py::ssize_t>(c.queries), static_cast<py::ssize_t>(c.per_query)});
                const float* v = typed_data<float>(values, name, "float32");
                out->assign(v, v + c.queries * c.per_query);
              }
              all.push_back(std::move(c));
            }
            Neighbors found;
            {
              py::gil_scoped_release release;
              found = index.merge(all);
            }
            const std::vector<py::ssize_t> dims = {static_cast<py::ssize_t>(found.queries),
                                                   static_cast<py::ssize_t>(found.k)};
            auto scores = new_array<float>(dims);
            auto ids = new_array<int64_t>(dims);
            std::copy(found.scores.begin(), found.scores.end(), scores.mutable_data());
            std::copy(found.ids.begin(), found.ids.end(), ids.mutable_data());
            return py::make_tuple(scores, ids);
          },
          py::arg("parts"), "(D, I) from the shards' candidates: what one index over all their vectors answers.");
}

}  // namespace kvsketch::python

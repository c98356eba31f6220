"""The peers of `kvsketch ann bench`, measured the same way on the same ann-benchmarks HDF5 file:
FAISS from PyPI (faiss-cpu: IVF-RaBitQ, its fast-scan form, IVF-PQ fast scan, HNSW over codes) by
index_factory string, and hnswlib. For each index: train and add time, bytes per vector (its
serialized size over the vectors), then at each point of its curve (nprobe, or efSearch) and each
thread count: recall@k (k-NN recall, a found row counting when its true distance is within the
k-th true one) and queries per second, one query per call and the batch in one call (medians of
repeated passes). Prints kvsketch ann bench's JSON rows.

  bash scripts/setup_bench.sh
  .venv-bench/bin/python scripts/ann/peers.py --data data/ann/fashion-mnist-784-euclidean.hdf5 \
      --indexes "faiss:IVF1024,RaBitQ;faiss:IVF1024,PQ392x4fs;hnswlib:M=16" --queries 1000
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import faiss
import h5py
import numpy as np


def load(path, queries):
    with h5py.File(path, "r") as f:
        base = np.ascontiguousarray(f["train"][:], dtype=np.float32)
        test = np.ascontiguousarray(f["test"][:], dtype=np.float32)
        distance = f.attrs.get("distance", "")
    name = os.path.basename(path)
    if queries:
        test = test[:queries]
    if distance == "angular" or "-angular" in name:
        metric = "cosine"
    elif distance == "euclidean" or "-euclidean" in name:
        metric = "l2"
    else:
        metric = "ip"
    if metric == "cosine":  # inner product over unit rows, as kvsketch's cosine
        base /= np.maximum(np.linalg.norm(base, axis=1, keepdims=True), 1e-30)
        test /= np.maximum(np.linalg.norm(test, axis=1, keepdims=True), 1e-30)
    return name, base, test, metric


def true_scores(base, queries, ids, metric):
    """Exact scores of found ids (similarity; squared distance for l2); a missing id never counts."""
    out = np.empty(ids.shape, dtype=np.float32)
    for q in range(ids.shape[0]):
        rows = ids[q]
        valid = rows >= 0
        x = base[np.where(valid, rows, 0)]
        if metric == "l2":
            s = ((x - queries[q]) ** 2).sum(1)
            s[~valid] = np.inf
        else:
            s = x @ queries[q]
            s[~valid] = -np.inf
        out[q] = s
    return out


def recall(truth_scores, found_scores, k, metric):
    """k-NN recall with kvsketch's slack: found rows whose true score is within the k-th true one."""
    kth = truth_scores[:, k - 1:k]
    slack = 1e-5 * np.maximum(np.abs(kth), 1e-3)
    good = found_scores[:, :k] <= kth + slack if metric == "l2" else found_scores[:, :k] >= kth - slack
    return float(good.mean())


class Faiss:
    """FACTORY[@name=value,...]: the parameters after @ are set once (for example k_factor of a
    Refine, or qb, the query bits of RaBitQ)."""

    def __init__(self, spec, base, metric):
        factory, _, fixed = spec.partition("@")
        m = faiss.METRIC_L2 if metric == "l2" else faiss.METRIC_INNER_PRODUCT
        self.index = faiss.index_factory(base.shape[1], factory, m)
        start = time.perf_counter()
        self.index.train(base)
        self.train_s = time.perf_counter() - start
        start = time.perf_counter()
        self.index.add(base)
        self.add_s = time.perf_counter() - start
        self.bytes = faiss.serialize_index(self.index).size
        self.parameter = "efSearch" if "HNSW" in factory else "nprobe"
        ivf = faiss.try_extract_index_ivf(self.index) if self.parameter == "nprobe" else None
        self.max_value = ivf.nlist if ivf is not None else None
        self.params = faiss.ParameterSpace()
        for item in [i for i in fixed.split(",") if i]:
            name, value = item.split("=")
            self.params.set_index_parameter(self.index, name, float(value))

    def set(self, value, threads):
        self.params.set_index_parameter(self.index, self.parameter, value)
        faiss.omp_set_num_threads(threads)

    def search(self, q, k):
        return self.index.search(q, k)[1]


class Hnswlib:
    def __init__(self, options, base, metric):
        import hnswlib
        fields = dict(item.split("=") for item in options.split(",") if item)
        self.index = hnswlib.Index(space="l2" if metric == "l2" else "ip", dim=base.shape[1])
        self.index.init_index(max_elements=len(base), M=int(fields.get("M", 16)),
                              ef_construction=int(fields.get("ef_construction", 200)), random_seed=0)
        self.train_s = 0.0
        start = time.perf_counter()
        self.index.add_items(base, np.arange(len(base)))
        self.add_s = time.perf_counter() - start
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "index.bin")
            self.index.save_index(path)
            self.bytes = os.path.getsize(path)
        self.parameter, self.max_value, self.threads = "efSearch", None, 1

    def set(self, value, threads):
        self.index.set_ef(value)
        self.threads = threads

    def search(self, q, k):
        return self.index.knn_query(q, k=k, num_threads=self.threads)[0].astype(np.int64)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="ann-benchmarks HDF5 file")
    parser.add_argument("--indexes", required=True, help="';'-separated faiss:FACTORY and hnswlib:M=..,ef_construction=..")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--nprobe", default="1,2,4,8,16,32,64,128")
    parser.add_argument("--ef-search", default="16,32,64,128,256,512")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--single", type=int, default=200)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    name, base, queries, metric = load(args.data, args.queries)
    exact = faiss.IndexFlatL2(base.shape[1]) if metric == "l2" else faiss.IndexFlatIP(base.shape[1])
    exact.add(base)
    truth = true_scores(base, queries, exact.search(queries, args.k)[1], metric)
    rows = []
    for spec in [s for s in args.indexes.split(";") if s]:
        family, _, options = spec.partition(":")
        if family == "faiss":
            index = Faiss(options, base, metric)
            label = f"faiss-{faiss.__version__}:{options}"
        elif family == "hnswlib":
            index = Hnswlib(options, base, metric)
            label = spec
        else:
            raise SystemExit(f"peers: {spec}: expected faiss:FACTORY or hnswlib:OPTIONS")
        curve = args.ef_search if index.parameter == "efSearch" else args.nprobe
        for value in [int(v) for v in curve.split(",")]:
            if index.max_value and value > index.max_value:
                continue
            for threads in [int(t) for t in args.threads.split(",")]:
                index.set(value, threads)
                single, batch = [], []
                for _ in range(args.repetitions):
                    start = time.perf_counter()
                    for q in range(min(args.single, len(queries))):
                        index.search(queries[q:q + 1], args.k)
                    single.append(time.perf_counter() - start)
                    start = time.perf_counter()
                    found = index.search(queries, args.k)
                    batch.append(time.perf_counter() - start)
                rows.append({"index": label, "dataset": name, "metric": metric, "dim": base.shape[1],
                             "base": len(base), "queries": len(queries), "k": args.k,
                             "parameter": index.parameter, "value": value, "threads": threads,
                             "recall": recall(truth, true_scores(base, queries, found, metric), args.k, metric),
                             "qps_single": min(args.single, len(queries)) / statistics.median(single),
                             "qps_batch": len(queries) / statistics.median(batch),
                             "train_s": index.train_s, "add_s": index.add_s,
                             "bytes_per_vector": index.bytes / len(base)})
                print(f"{label} {index.parameter}={value} threads={threads}: recall {rows[-1]['recall']:.3f}, "
                      f"{rows[-1]['qps_single']:.0f} q/s single, {rows[-1]['qps_batch']:.0f} batch", file=sys.stderr)
    json.dump(rows, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()

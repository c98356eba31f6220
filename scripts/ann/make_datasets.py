"""ann-benchmarks HDF5 files (train, test, neighbors, distances) for `kvsketch ann bench` and
scripts/ann/peers.py, so that both read the same vectors:
  fashion-mnist   Debian's dataset-fashion-mnist: 60,000 train images as base, the 10,000 t10k
                  images as queries, 784 dims, euclidean
  sift-5k         the bundled SIFT sample (data/sift-5k.tsv, its last column the ids): the first
                  4,500 rows as base, the last 500 as queries, 128 dims, euclidean
  synthetic       N vectors at d dims around 4096 Gaussian centres (scale and memory), inner
                  product after unit norm (angular), seeded
The sentence embeddings come from scripts/ann/embed_sentences.py.

  .venv-bench/bin/python scripts/ann/make_datasets.py fashion-mnist --out data/ann
  .venv-bench/bin/python scripts/ann/make_datasets.py synthetic --n 1000000 --dim 768 --out data/ann
"""
import argparse
import gzip
import os

import faiss
import h5py
import numpy as np

FASHION = "/usr/share/datasets/fashion-mnist"


def idx_images(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    count, rows, cols = (int.from_bytes(data[i:i + 4], "big") for i in (4, 8, 12))
    return np.frombuffer(data, dtype=np.uint8, offset=16).reshape(count, rows * cols).astype(np.float32)


def write(path, train, test, metric, source, neighbors=100):
    exact = faiss.IndexFlatL2(train.shape[1]) if metric == "euclidean" else faiss.IndexFlatIP(train.shape[1])
    exact.add(train)
    scores, ids = exact.search(test, neighbors)
    if metric == "angular":
        scores = 1.0 - scores
    with h5py.File(path, "w") as f:
        f.attrs["distance"] = metric
        f.attrs["source"] = source
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        f.create_dataset("neighbors", data=ids.astype(np.int32))
        f.create_dataset("distances", data=np.sqrt(np.maximum(scores, 0)) if metric == "euclidean" else scores)
    print(f"{path}: {len(train)} base and {len(test)} queries of {train.shape[1]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", choices=["fashion-mnist", "sift-5k", "synthetic"])
    parser.add_argument("--out", default="data/ann")
    parser.add_argument("--n", type=int, default=1000000)
    parser.add_argument("--dim", type=int, default=768)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.dataset == "fashion-mnist":
        train = idx_images(os.path.join(FASHION, "train-images-idx3-ubyte.gz"))
        test = idx_images(os.path.join(FASHION, "t10k-images-idx3-ubyte.gz"))
        write(os.path.join(args.out, "fashion-mnist-784-euclidean.hdf5"), train, test, "euclidean",
              "Debian dataset-fashion-mnist")
    elif args.dataset == "sift-5k":
        rows = np.loadtxt(os.path.join(os.path.dirname(__file__), "..", "..", "data", "sift-5k.tsv"),
                          dtype=np.float32)[:, :-1]
        write(os.path.join(args.out, "sift-5k-128-euclidean.hdf5"), np.ascontiguousarray(rows[:4500]),
              np.ascontiguousarray(rows[4500:]), "euclidean", "kvsketch data/sift-5k.tsv (SIFT1M sample)")
    else:
        random = np.random.default_rng(args.seed)
        centres = random.standard_normal((4096, args.dim), dtype=np.float32)
        total = args.n + args.queries
        x = np.empty((total, args.dim), dtype=np.float32)
        for start in range(0, total, 100000):
            end = min(total, start + 100000)
            x[start:end] = centres[random.integers(0, 4096, end - start)] + \
                0.7 * random.standard_normal((end - start, args.dim), dtype=np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        write(os.path.join(args.out, f"synthetic-{args.n}-{args.dim}-angular.hdf5"), x[:args.n], x[args.n:], "angular",
              f"kvsketch scripts/ann/make_datasets.py synthetic seed {args.seed}", neighbors=10)


if __name__ == "__main__":
    main()

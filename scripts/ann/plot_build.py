"""Build time (train + add) of kvsketch's IVF index against FAISS IVF-PQ with the same nlist, as a
bar chart: the JSON rows of `kvsketch ann bench` (with and without AMX) and of scripts/ann/peers.py
for each dataset, as written by the commands of docs/RESULTS.md ("Build time").

  .venv-bench/bin/python scripts/ann/plot_build.py --dir results/build --png docs/img/ann_build_time.png
"""
import argparse
import json
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def builds(path):
    """index -> train + add seconds (one build per index; the curve rows repeat it)."""
    out = {}
    for row in json.load(open(path)):
        out.setdefault(row["index"], row["train_s"] + row["add_s"])
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", default="results/build")
    parser.add_argument("--png", required=True)
    args = parser.parse_args()
    datasets = [("fashion", "Fashion-MNIST\n60k x 784, nlist 1024"), ("minilm", "MiniLM\n200k x 384, nlist 2048")]
    labels = ["kvsketch, AMX-BF16 screen", "kvsketch, AVX-512 (KVSKETCH_AMX=0)", "FAISS 1.7.3 (Debian) IVF-PQ",
              "faiss-cpu 1.13 IVF-PQ"]
    values = []
    for name, _ in datasets:
        amx = builds(os.path.join(args.dir, f"{name}-amx.json"))
        noamx = builds(os.path.join(args.dir, f"{name}-noamx.json"))
        peers = builds(os.path.join(args.dir, f"{name}-peers.json"))
        ours = next(v for k, v in amx.items() if k.startswith("ivf:") and "max_train" not in k)
        debian = next(v for k, v in amx.items() if k.startswith("faiss:"))
        values.append([ours, next(iter(noamx.values())), debian, next(iter(peers.values()))])
    fig, ax = plt.subplots(figsize=(7.5, 3.6))
    width = 0.2
    for i, label in enumerate(labels):
        xs = [d + (i - 1.5) * width for d in range(len(datasets))]
        bars = ax.bar(xs, [v[i] for v in values], width, label=label)
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(datasets)), [title for _, title in datasets])
    ax.set_ylabel("build seconds (train + add), 2 threads")
    ax.legend(fontsize=8, frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout()
    fig.savefig(args.png, dpi=120)


if __name__ == "__main__":
    main()

"""Plots and tables of `kvsketch ann bench` and scripts/ann/peers.py rows (JSON files): per
dataset, recall@k against queries per second (log) for one query per call and for the batch, at one
and two threads; and a Markdown table of each index's best queries per second at recall >= 0.90 and
>= 0.95 (ann-benchmarks' reading of a curve: the fastest point that reaches the recall), with its
build time, bytes per vector and the best recall of its curve.

  python3 scripts/ann/plot_bench.py ours.json peers.json --png docs/img/ann_fashion.png --table
"""
import argparse
import json
import sys


def load(paths):
    rows = []
    for path in paths:
        with open(path) as f:
            for row in json.load(f):
                row["dataset"] = row["dataset"].rsplit("/", 1)[-1]
                rows.append(row)
    return rows


def best_at(rows, recall, mode):
    points = [r for r in rows if r["recall"] >= recall]
    if not points:
        return None
    return max(points, key=lambda r: r[mode])


def table(rows, targets=(0.90, 0.95)):
    out = []
    for dataset in sorted({r["dataset"] for r in rows}):
        data = [r for r in rows if r["dataset"] == dataset]
        out.append(f"\n**{dataset}** ({data[0]['base']} x {data[0]['dim']}, {data[0]['queries']} queries, "
                   f"{data[0]['metric']}, recall@{data[0]['k']})\n")
        header = "| index | bytes/vector | build s | best recall |"
        for t in targets:
            header += f" q/s @{t:.2f} 1 thr (1 / batch) | q/s @{t:.2f} 2 thr (1 / batch) |"
        out.append(header)
        out.append("|" + "---|" * (4 + 2 * len(targets)))
        for index in dict.fromkeys(r["index"] for r in data):
            mine = [r for r in data if r["index"] == index]
            cell = index.replace("|", "\\|")  # a factory's '|' would end the Markdown cell
            line = (f"| `{cell}` | {mine[0]['bytes_per_vector']:.1f} | {mine[0]['train_s'] + mine[0]['add_s']:.1f} | "
                    f"{max(r['recall'] for r in mine):.3f} |")
            for t in targets:
                for threads in (1, 2):
                    pts = [r for r in mine if r["threads"] == threads]
                    single, batch = best_at(pts, t, "qps_single"), best_at(pts, t, "qps_batch")
                    if single is None:
                        line += " - |"
                    else:
                        line += (f" {single['qps_single']:.0f} ({single['parameter']} {single['value']}) / "
                                 f"{batch['qps_batch']:.0f} |")
            out.append(line)
    return "\n".join(out)


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    datasets = sorted({r["dataset"] for r in rows})
    fig, axes = plt.subplots(len(datasets), 4, figsize=(20, 4.2 * len(datasets)), squeeze=False)
    for row_axes, dataset in zip(axes, datasets):
        data = [r for r in rows if r["dataset"] == dataset]
        for ax, (threads, mode) in zip(row_axes, [(1, "qps_single"), (1, "qps_batch"), (2, "qps_single"),
                                                  (2, "qps_batch")]):
            for index in dict.fromkeys(r["index"] for r in data):
                pts = sorted((r for r in data if r["index"] == index and r["threads"] == threads),
                             key=lambda r: r["value"])
                if not pts:
                    continue
                style = "-o" if index.startswith("ivf") else "--s"
                ax.plot([p["recall"] for p in pts], [p[mode] for p in pts], style, markersize=3,
                        label=f"{index} ({pts[0]['bytes_per_vector']:.0f} B)")
            ax.set_yscale("log")
            ax.set_xlabel(f"recall@{data[0]['k']}")
            ax.set_ylabel("queries per second")
            ax.set_title(f"{dataset}: {threads} thread{'s' if threads > 1 else ''}, "
                         f"{'one query per call' if mode == 'qps_single' else 'batch'}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
        row_axes[0].legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}", file=sys.stderr)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", nargs="+")
    parser.add_argument("--png")
    parser.add_argument("--table", action="store_true")
    args = parser.parse_args()
    rows = load(args.json)
    if args.png:
        plot(rows, args.png)
    if args.table:
        print(table(rows))


if __name__ == "__main__":
    main()

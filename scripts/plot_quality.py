#!/usr/bin/env python3
"""Plots of the model measurements, from the commands' JSON:

    build/kvsketch retrieval ... --json > passkey.json
    python3 scripts/plot_quality.py retrieval passkey.json docs/img/passkey.png
    build/kvsketch perplexity ... --json > ppl.json
    python3 scripts/plot_quality.py perplexity ppl.json docs/img/kld.png

retrieval: one heatmap per policy, accuracy by context (rows) and depth (columns).
perplexity: mean KLD against bits per value, one point per policy, with the seeds' spread.
Needs matplotlib (Debian python3-matplotlib: scripts/setup_training.sh installs it).
"""
import json
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def retrieval(report, out):
    policies = report["policies"]
    contexts = sorted({c["context"] for c in policies[0]["cells"]})
    depths = sorted({c["depth"] for c in policies[0]["cells"]})
    columns = min(4, len(policies))
    rows = (len(policies) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(3.2 * columns, 0.6 * len(contexts) * rows + 1.2), squeeze=False)
    for ax, p in zip(axes.flat, policies):
        grid = [[0.0] * len(depths) for _ in contexts]
        for c in p["cells"]:
            grid[contexts.index(c["context"])][depths.index(c["depth"])] = c["accuracy"]
        ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
        ax.set_title(f'{p["policy"]}\n{100 * p["accuracy"]:.0f}%, {p["bits_per_value"]:.2f} bits', fontsize=8)
        ax.set_xticks(range(len(depths)), [f"{d:g}" for d in depths], fontsize=7)
        ax.set_yticks(range(len(contexts)), [str(c) for c in contexts], fontsize=7)
        ax.set_xlabel("depth", fontsize=7)
        for i, row in enumerate(grid):
            for j, v in enumerate(row):
                ax.text(j, i, f"{100 * v:.0f}", ha="center", va="center", fontsize=7)
    for ax in list(axes.flat)[len(policies):]:
        ax.axis("off")
    fig.suptitle(f'{report["task"]} accuracy (rows: prompt tokens)', fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def family(policy):
    """A policy with its bit widths taken out: the rows of one codec at several widths share it, and
    are drawn as one curve (rows whose keys and values differ in width stay points of their own)."""
    widths = set(re.findall(r"b=([\d.]+)", policy))
    name = re.sub(r"b=[\d.]+", "b=B", policy)
    return name if len(widths) <= 1 else policy


def perplexity(report, out):
    # Policies of at most 8 bits per value: q8_0 and exact sit orders of magnitude lower.
    shown = [p for p in report["policies"] if p["bits_per_value"] <= 8 and p["kld_mean"] > 0]
    families = {}
    for p in sorted(shown, key=lambda p: p["bits_per_value"]):
        families.setdefault(family(p["policy"]), []).append(p)
    fig, ax = plt.subplots(figsize=(8.4, 4.4))
    markers = "os^Dv<>pP*Xh"
    for i, (name, rows) in enumerate(families.items()):
        x = [p["bits_per_value"] for p in rows]
        y = [p["kld_mean"] for p in rows]
        low = [p["kld_mean"] - min(p["kld_mean_per_seed"]) for p in rows]
        high = [max(p["kld_mean_per_seed"]) - p["kld_mean"] for p in rows]
        ax.errorbar(x, y, yerr=[low, high], fmt=markers[i % len(markers)] + ("-" if len(rows) > 1 else ""),
                    capsize=3, linewidth=1, markersize=5, label=name if len(rows) > 1 else rows[0]["policy"])
    ax.set_xlabel("bits per value (everything the cache holds, fp16 sinks and window included)")
    ax.set_ylabel("mean KLD against the fp16 cache")
    ax.set_yscale("log")
    scoring = f', {report["scoring"]} scoring' if "scoring" in report else ""
    ax.set_title(f'{report["model"]}: {report["windows"]} windows of {report["context"]} tokens{scoring} (bars: seeds)',
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("retrieval", "perplexity"):
        sys.exit(__doc__)
    with open(sys.argv[2]) as f:
        data = json.load(f)
    (retrieval if sys.argv[1] == "retrieval" else perplexity)(data, sys.argv[3])

#!/usr/bin/env python3
"""BalanceKV against uniform sampling of as many tokens, over many seeds (each seed a new cache and
a new selection; one selection serves every query of a cache, so seeds, not queries, carry the
variance). Runs `kvsketch sparse` twice per seed: BalanceKV at each ratio, then uniform sampling at
each ratio's measured budget. Prints a markdown table of the mean rel_error per regime and ratio,
the mean paired difference and its standard error.

    python3 scripts/balancekv_seeds.py [--seeds 30] [--tokens 8192] [--kvsketch build/kvsketch]
"""
import argparse
import json
import math
import statistics
import subprocess

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--seeds", type=int, default=30)
parser.add_argument("--tokens", type=int, default=8192)
parser.add_argument("--queries", type=int, default=16)
parser.add_argument("--ratios", default="0.5,0.25,0.125,0.0625")
parser.add_argument("--model", default="hidden-state")
parser.add_argument("--kvsketch", default="build/kvsketch")
args = parser.parse_args()
ratios = args.ratios.split(",")


def sparse(methods, seed):
    out = subprocess.run([args.kvsketch, "sparse", "--synthetic", "default", "--synthetic-model", args.model,
                          "--tokens", str(args.tokens), "--num-queries", str(args.queries), "--seed", str(seed),
                          "--methods", ";".join(methods), "--json"], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


# (regime, ratio) -> list of (balancekv, uniform) rel_errors, one pair per seed
pairs = {}
regimes = []
for seed in range(1, args.seeds + 1):
    balance = sparse([f"balancekv:ratio={r}" for r in ratios], seed)
    regimes = list(dict.fromkeys(row["regime"] for row in balance))
    # The selection does not look at the queries, so every regime of a seed reads the same budget.
    budgets = {}
    for row in balance:
        ratio = row["method"].split(",")[0].split("=")[1]
        budgets.setdefault(ratio, row["budget"])
        assert abs(budgets[ratio] - row["budget"]) < 1e-12, "budget differs between regimes"
    uniform = sparse([f"uniform:budget={budgets[r]:.6f}" for r in ratios], seed)
    assert len(balance) == len(uniform)
    for b, u in zip(balance, uniform):
        ratio = b["method"].split(",")[0].split("=")[1]
        assert b["regime"] == u["regime"] and abs(u["budget"] - budgets[ratio]) < 1e-3, (b, u)
        pairs.setdefault((b["regime"], ratio), []).append((b["rel_error"], u["rel_error"]))

print(f"BalanceKV / uniform sampling, mean rel_error over {args.seeds} seeds at {args.tokens} tokens; "
      f"difference ± standard error (bold: BalanceKV lower by more than two standard errors)\n")
print("| ratio | " + " | ".join(regimes) + " |")
print("|---|" + "---|" * len(regimes))
for ratio in ratios:
    cells = []
    for regime in regimes:
        cell = pairs[(regime, ratio)]
        diffs = [b - u for b, u in cell]
        mean = statistics.mean(diffs)
        error = statistics.stdev(diffs) / math.sqrt(len(diffs)) if len(diffs) > 1 else float("nan")
        mark = "**" if mean + 2 * error < 0 else ""
        cells.append(f"{statistics.mean(b for b, _ in cell):.3f} / {statistics.mean(u for _, u in cell):.3f} "
                     f"({mark}{mean:+.3f} ± {error:.3f}{mark})")
    print(f"| 1/{round(1 / float(ratio))} | " + " | ".join(cells) + " |")

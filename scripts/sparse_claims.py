#!/usr/bin/env python3
"""The two papers' claims from `kvsketch sparse --json` rows of the standard comparison (stdin):
MagicPIG against oracle top-k and uniform sampling at MagicPIG's budget, and BalanceKV against
uniform sampling at BalanceKV's budget, as markdown tables of rel_error per regime."""
import json
import sys

rows = json.load(sys.stdin)
# setting -> regime -> (budget, the method's rel_error, its baselines' rel_errors in row order)
pig, balance = {}, {}
for i, r in enumerate(rows):
    if r["method"].startswith("magicpig:"):
        setting = ",".join(r["method"][len("magicpig:"):].split(",")[:2])
        pig.setdefault(setting, {})[r["regime"]] = (r["budget"], r["rel_error"],
                                                   [rows[i + 1]["rel_error"], rows[i + 2]["rel_error"]])
    if r["method"].startswith("balancekv:"):
        ratio = r["method"].split(",")[0].split("=")[1]
        balance.setdefault(f"1/{round(1 / float(ratio))}", {})[r["regime"]] = (r["budget"], r["rel_error"],
                                                                              [rows[i + 1]["rel_error"]])
regimes = list(dict.fromkeys(r["regime"] for r in rows))


def table(title, label, by_setting):
    """One row per setting; a cell is the method's error (bold when below the first baseline's),
    the baselines' errors and the budget."""
    print(title + "\n")
    print(f"| {label} | " + " | ".join(regimes) + " |")
    print("|---|" + "---|" * len(regimes))
    for setting, by_regime in by_setting.items():
        cells = []
        for regime in regimes:
            budget, error, baselines = by_regime[regime]
            mark = "**" if error < baselines[0] else ""
            cells.append(f"{mark}{error:.3f}{mark} / " + " / ".join(f"{b:.3f}" for b in baselines) +
                         f" ({100 * budget:.1f}%)")
        print(f"| {setting} | " + " | ".join(cells) + " |")


table("MagicPIG / oracle top-k / uniform sampling, rel_error at MagicPIG's budget (bold: MagicPIG below top-k)",
      "(K, L)", pig)
print()
table("BalanceKV / uniform sampling, rel_error at BalanceKV's budget (bold: BalanceKV below uniform)", "ratio",
      balance)

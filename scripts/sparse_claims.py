#!/usr/bin/env python3
"""The two papers' claims from `kvsketch sparse --json` rows of the standard comparison (stdin):
MagicPIG against oracle top-k and uniform sampling at MagicPIG's budget, and BalanceKV against
uniform sampling at BalanceKV's budget, as markdown tables of rel_error per regime."""
import json
import sys

rows = json.load(sys.stdin)
pig, balance = {}, {}
for i, r in enumerate(rows):
    if r["method"].startswith("magicpig:"):
        setting = ",".join(r["method"][len("magicpig:"):].split(",")[:2])
        pig.setdefault(setting, {})[r["regime"]] = (r["budget"], r["rel_error"], rows[i + 1]["rel_error"],
                                                   rows[i + 2]["rel_error"])
    if r["method"].startswith("balancekv:"):
        ratio = r["method"].split(",")[0].split("=")[1]
        balance.setdefault(ratio, {})[r["regime"]] = (r["budget"], r["rel_error"], rows[i + 1]["rel_error"])
regimes = list(dict.fromkeys(r["regime"] for r in rows))

print("MagicPIG / oracle top-k / uniform sampling, rel_error at MagicPIG's budget (bold: MagicPIG below top-k)\n")
print("| (K, L) | " + " | ".join(regimes) + " |")
print("|---|" + "---|" * len(regimes))
for setting, by_regime in pig.items():
    cells = []
    for regime in regimes:
        budget, p, t, u = by_regime[regime]
        mark = "**" if p < t else ""
        cells.append(f"{mark}{p:.3f}{mark} / {t:.3f} / {u:.3f} ({100 * budget:.1f}%)")
    print(f"| {setting} | " + " | ".join(cells) + " |")

print("\nBalanceKV / uniform sampling, rel_error at BalanceKV's budget (bold: BalanceKV below uniform)\n")
print("| ratio | " + " | ".join(regimes) + " |")
print("|---|" + "---|" * len(regimes))
for ratio, by_regime in balance.items():
    cells = []
    for regime in regimes:
        budget, b, u = by_regime[regime]
        mark = "**" if b < u else ""
        cells.append(f"{mark}{b:.3f}{mark} / {u:.3f} ({100 * budget:.1f}%)")
    print(f"| 1/{round(1 / float(ratio))} | " + " | ".join(cells) + " |")

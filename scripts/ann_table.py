#!/usr/bin/env python3
"""Markdown table from `kvsketch ann eval --json` rows (stdin)."""
import json
import sys

rows = json.load(sys.stdin)


def short(codec):
    # Drop the parameters every TurboQuant row spells out by default.
    for default in (",rotation=hadamard", ",rounds=2", ",codebook=beta", ",norm=fp16", ",sketch=hadamard", ",pca=auto", ",seed=0"):
        codec = codec.replace(default, "")
    return codec


def cell(value):
    return "-" if value is None else f"{value:.3f}"


print("| codec | bits | bytes/vector | 1@1 | 1@10 | 1@100 | 10@10 | build s | ms/query | ms/query batch |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in rows:
    print(f"| `{short(r['codec'])}` | {r['bits']:g} | {r['bytes_per_vector']} | {cell(r['recall_1_at_1'])} | "
          f"{cell(r['recall_1_at_10'])} | {cell(r['recall_1_at_100'])} | {cell(r['recall_10_at_10'])} | "
          f"{r['build_s']:.3f} | {r['ms_per_query']:.3f} | {r['ms_per_query_batch']:.3f} |")

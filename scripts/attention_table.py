#!/usr/bin/env python3
"""Markdown table from `kvsketch attention --json` rows on stdin (as in docs/RESULTS.md)."""
import json
import sys

rows = json.load(sys.stdin)
print("| policy | regime | bits/value | bytes | rel_error | kl | top8 | µs/query | vs fp16 |")
print("|---|---|---|---|---|---|---|---|---|")
for r in rows:
    speed = r.get("speedup_vs_fp16")
    policy = r["policy"].replace("|", "\\|")  # a K|V policy's bar would split the cell
    print(f"| `{policy}` | {r['regime']} | {r['bits_per_value']:.2f} | {r['bytes']} | {r['rel_error']:.5f} | "
          f"{r['kl']:.2e} | {r['top8_overlap']:.3f} | {r['ns_per_query'] / 1000:.1f} | "
          f"{'%.2fx' % speed if speed is not None else '-'} |")

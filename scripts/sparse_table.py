#!/usr/bin/env python3
"""Markdown table from `kvsketch sparse --json` or `kvsketch bench sparse --json` rows (stdin)."""
import json
import sys

rows = json.load(sys.stdin)
if rows and "fraction_of_fp16" in rows[0]:
    print("| method | tokens | budget | index bytes/token | us/step | fp16 us/step | of fp16 | prefill tokens/s | insert us/token |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| `{r['method']}` | {r['tokens']} | {r['budget']:.4f} | {r['index_bytes_per_token']:.0f} | "
              f"{r['ns_per_query'] / 1000:.0f} | {r['fp16_ns_per_query'] / 1000:.0f} | {100 * r['fraction_of_fp16']:.1f}% | "
              f"{r['prefill_tokens_per_s']:.0f} | {r['insert_us_per_token']:.2f} |")
else:
    print("| method | regime | budget | index bytes/token | rel_error | lse_error | kl |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        per_token = r["index_bytes"] / max(r["body_tokens"], 1)
        print(f"| `{r['method']}` | {r['regime']} | {r['budget']:.4f} | {per_token:.0f} | {r['rel_error']:.4f} | "
              f"{r['lse_error']:.4f} | {r['kl']:.3f} |")

#!/usr/bin/env python3
"""Markdown table of `kvsketch sparse --json` runs over several --body storages (their JSON arrays
concatenated on stdin): rel_error per method and regime, one column per body, with the bits per
value each body holds (head_dim 128)."""
import json
import sys

text, rows, decoder, at = sys.stdin.read(), [], json.JSONDecoder(), 0
while at < len(text):
    while at < len(text) and text[at].isspace():
        at += 1
    if at == len(text):
        break
    part, at = decoder.raw_decode(text, at)
    rows.extend(part)

bodies = list(dict.fromkeys(r["body"] for r in rows))
dim = 128
bits = {}
for r in rows:
    bits.setdefault(r["body"], 8 * r["kv_bytes"] / (2 * dim * r["body_tokens"]))
print("| method | regime | " + " | ".join(f"body {i + 1} ({bits[b]:.2f} bits)" for i, b in enumerate(bodies)) + " |")
print("|---|---|" + "---|" * len(bodies))
cells = {(r["method"], r["regime"], r["body"]): r for r in rows}
for method, regime in dict.fromkeys((r["method"], r["regime"]) for r in rows):
    values = []
    for b in bodies:
        r = cells.get((method, regime, b))
        values.append("" if r is None else f"{r['rel_error']:.3f}")
    print(f"| `{method.split(',block')[0].split(',hits')[0]}` | {regime} | " + " | ".join(values) + " |")
print()
for i, b in enumerate(bodies):
    held = "exact floats, counted as fp16 K and V" if b == "float" else "everything counted"
    print(f"- body {i + 1}: `{b}` ({bits[b]:.2f} bits per value, {held})")

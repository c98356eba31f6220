#!/usr/bin/env python3
"""The cost of calling kvsketch from Python: one decode step (4k tokens, 8 KV heads, 32 query
heads of 128, tq_mse:b=3) through KVCache.attention against the same C++ call timed in C++, in
one run, medians over alternated rounds; then the same for a minimal step (64 tokens, one head),
where the difference is the binding's own cost. Prints one JSON line each.

    PYTHONPATH=build/python .venv/bin/python python/bench/attention_overhead.py
"""
import json
import statistics
import time

import numpy as np

import kvsketch


def main(tokens=4096, kv_heads=8, q_heads=32, dim=128, rounds=7, calls=200, threads=1):
    rng = np.random.default_rng(0)
    cache = kvsketch.KVCache(1, kv_heads, dim, policy="tq_mse:b=3")
    s = cache.add_sequence()
    cache.append(s, 0, rng.standard_normal((kv_heads, tokens, dim)).astype(np.float32),
                 rng.standard_normal((kv_heads, tokens, dim)).astype(np.float32))
    q = rng.standard_normal((1, q_heads, dim)).astype(np.float32)
    python_us, native_us = [], []
    for _ in range(rounds):
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            cache.attention(0, [s], q, threads=threads)
            times.append(time.perf_counter() - start)
        python_us.append(1e6 * statistics.median(times))
        native_us.append(1e6 * cache._native_attention_seconds(0, [s], q, calls, threads))
    python, native = statistics.median(python_us), statistics.median(native_us)
    print(json.dumps({"tokens": tokens, "kv_heads": kv_heads, "q_heads": q_heads, "dim": dim, "policy": "tq_mse:b=3", "threads": threads,
                      "python_us": round(python, 2), "native_us": round(native, 2),
                      "overhead_us": round(python - native, 2),
                      "overhead_us_per_round": [round(p - n, 2) for p, n in zip(python_us, native_us)]}))


if __name__ == "__main__":
    main()
    main(tokens=64, kv_heads=1, q_heads=1, calls=2000)

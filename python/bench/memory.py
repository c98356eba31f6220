#!/usr/bin/env python3
"""What a Python process holds for a compressed cache: bytes(), allocated_bytes() and the growth of
resident memory (before and after returning freed heap pages with malloc_trim), for 16 sequences
of 16k tokens appended in prefill chunks of 4096 (8 KV heads of 128, tq_mse:b=3). Prints JSON.

    PYTHONPATH=build/python .venv/bin/python python/bench/memory.py
"""
import ctypes
import json
import os

import numpy as np

import kvsketch


def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def main(sequences=16, chunks=4, chunk=4096, kv_heads=8, dim=128, policy="tq_mse:b=3"):
    keys = np.random.default_rng(0).standard_normal((kv_heads, chunk, dim)).astype(np.float32)
    before = resident()
    cache = kvsketch.KVCache(1, kv_heads, dim, policy=policy)
    for _ in range(sequences):
        s = cache.add_sequence()
        for _ in range(chunks):
            cache.append(s, 0, keys, keys)
    grown = resident() - before
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    trimmed = resident() - before
    fp16 = sequences * chunks * chunk * kv_heads * dim * 2 * 2
    print(json.dumps({"policy": policy, "tokens": sequences * chunks * chunk, "fp16_bytes": fp16,
                      "bytes": cache.bytes(), "allocated_bytes": cache.allocated_bytes(), "resident_growth": grown,
                      "resident_growth_after_trim": trimmed, "allocated_over_bytes": round(cache.allocated_bytes() / cache.bytes(), 3),
                      "resident_over_bytes": round(grown / cache.bytes(), 3),
                      "trimmed_over_bytes": round(trimmed / cache.bytes(), 3)}))


if __name__ == "__main__":
    main()

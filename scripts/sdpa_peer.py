#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention decoding one token over an fp16 cache: the outside peer
of kvsketch_cuda_bench, at the same shapes (batch, context, 8 KV heads, 4 query heads per KV
head, head_dim 128 by default). Each timed call follows a 256 MiB write that evicts the L2;
medians of CUDA-event intervals. Prints one JSON object per line.

    python3 scripts/sdpa_peer.py [--tokens 32768,65536,131072] [--batches 1,8,32,64]
"""
import argparse
import json

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def median_us(call, flush, repetitions):
    for _ in range(3):
        call()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for i in range(repetitions):
        flush.fill_(i)
        start.record()
        call()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", default="32768,65536,131072")
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--repetitions", type=int, default=15)
    args = parser.parse_args()
    device = torch.device("cuda")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device=device)
    print(json.dumps({"kind": "sdpa_device", "device": torch.cuda.get_device_name(0), "torch": torch.__version__}))
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    q_heads = args.kv_heads * args.group
    for batch in [int(b) for b in args.batches.split(",")]:
        for tokens in [int(t) for t in args.tokens.split(",")]:
            need = 2 * batch * args.kv_heads * tokens * args.dim * 2
            if need + (4 << 30) > torch.cuda.mem_get_info()[0]:
                print(json.dumps({"kind": "sdpa_skipped", "batch": batch, "tokens": tokens}))
                continue
            q = torch.randn(batch, q_heads, 1, args.dim, device=device, dtype=torch.float16)
            k = torch.randn(batch, args.kv_heads, tokens, args.dim, device=device, dtype=torch.float16)
            v = torch.randn_like(k)
            for name, backend in backends:
                try:
                    with sdpa_kernel([backend]):
                        call = lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                        call()
                        torch.cuda.synchronize()
                        us = median_us(call, flush, args.repetitions)
                except RuntimeError as error:
                    print(json.dumps({"kind": "sdpa_refused", "backend": name, "batch": batch, "tokens": tokens,
                                      "why": str(error).splitlines()[0][:200]}))
                    continue
                print(json.dumps({"kind": "sdpa", "backend": name, "batch": batch, "tokens": tokens,
                                  "kv_heads": args.kv_heads, "q_heads": q_heads, "dim": args.dim, "us": round(us, 2),
                                  "GBps": round(need / us / 1e3, 1)}), flush=True)
            del q, k, v
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()

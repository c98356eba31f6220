#!/usr/bin/env python3
"""transformers' decode loop through kvsketch.hf against DynamicCache, in one run: a random-weight
Llama of realistic shape (by default 8 layers, 32 query heads and 8 KV heads of 128, hidden 4096,
MLP 14336, float32) with a context of --context tokens already cached, then --steps greedy decode
steps per cache, alternated step by step. The context's keys and values are random normals put into
a DynamicCache and moved into each kvsketch cache with Cache.from_cache, so no 8k-token prefill is
needed. Reports medians of the step time, tokens/s, the time inside the attention function, and the
bytes each cache holds. Prints one JSON object.

    bash scripts/setup_torch.sh
    .venv-torch/bin/python python/bench/hf_generate.py --context 8192 --steps 16 --threads 2
"""
import argparse
import json
import statistics
import time

import torch
from transformers import AttentionInterface, DynamicCache, LlamaConfig, LlamaForCausalLM
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

import kvsketch.hf as kh

_attention_seconds = [0.0]


def timed(function):
    def run(*args, **kwargs):
        start = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _attention_seconds[0] += time.perf_counter() - start
    return run


# The same functions as "sdpa" and "kvsketch", timed; their masks are those implementations' own.
AttentionInterface.register("sdpa_timed", timed(sdpa_attention_forward))
AttentionMaskInterface.register("sdpa_timed", ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
AttentionInterface.register("kvsketch_timed", timed(kh.attention))
AttentionMaskInterface.register("kvsketch_timed", ALL_MASK_ATTENTION_FUNCTIONS[kh.ATTENTION])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--intermediate", type=int, default=14336)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--context", type=int, default=8192)
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--policies", default="fp16,tq_mse:b=3")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                         num_hidden_layers=args.layers, num_attention_heads=args.heads,
                         num_key_value_heads=args.kv_heads, max_position_embeddings=args.context + args.steps + 8)
    start = time.perf_counter()
    model = LlamaForCausalLM(config).eval()
    build_s = time.perf_counter() - start
    head_dim = args.hidden // args.heads
    generator = torch.Generator().manual_seed(1)
    dynamic = DynamicCache(config=config)
    for layer in range(args.layers):
        shape = (1, args.kv_heads, args.context, head_dim)
        dynamic.update(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator), layer)
    runs = {"DynamicCache+sdpa": (dynamic, "sdpa_timed")}
    fill_s = {}
    for policy in args.policies.split(","):
        start = time.perf_counter()
        runs[policy] = (kh.Cache.from_cache(dynamic, config, policy=policy, threads=args.threads), "kvsketch_timed")
        fill_s[policy] = time.perf_counter() - start
    # from_cache read the DynamicCache before any step: every cache starts from the same context.
    tokens = {name: torch.tensor([[7]]) for name in runs}
    steps = {name: [] for name in runs}
    attention = {name: [] for name in runs}
    with torch.no_grad():
        for _ in range(args.steps):
            for name, (cache, implementation) in runs.items():
                model.set_attn_implementation(implementation)
                _attention_seconds[0] = 0.0
                start = time.perf_counter()
                logits = model(tokens[name], cache=cache, use_cache=True).logits[:, -1]
                steps[name].append(time.perf_counter() - start)
                attention[name].append(_attention_seconds[0])
                tokens[name] = logits.argmax(-1, keepdim=True)
    dynamic_bytes = sum(layer.keys.nbytes + layer.values.nbytes for layer in dynamic.layers)
    base = statistics.median(steps["DynamicCache+sdpa"])
    base_attention = statistics.median(attention["DynamicCache+sdpa"])
    results = {}
    for name, (cache, _) in runs.items():
        step = statistics.median(steps[name])
        attn = statistics.median(attention[name])
        held = dynamic_bytes if cache is dynamic else cache.bytes()
        results[name] = {"step_ms": round(1e3 * step, 2), "tokens_per_s": round(1 / step, 3),
                         "speedup_vs_dynamic": round(base / step, 3), "attention_ms": round(1e3 * attn, 2),
                         "attention_speedup_vs_dynamic": round(base_attention / attn, 3),
                         "cache_bytes": held, "cache_bytes_ratio_vs_dynamic": round(dynamic_bytes / held, 2),
                         "step_ms_each": [round(1e3 * s, 1) for s in steps[name]]}
        if name in fill_s:
            results[name]["from_cache_s"] = round(fill_s[name], 2)
    print(json.dumps({"model": {"layers": args.layers, "hidden": args.hidden, "heads": args.heads,
                                "kv_heads": args.kv_heads, "head_dim": head_dim, "intermediate": args.intermediate,
                                "vocab": args.vocab, "dtype": "float32", "build_s": round(build_s, 1)},
                      "context": args.context, "steps": args.steps, "threads": args.threads,
                      "torch": torch.__version__, "results": results}, indent=1))


if __name__ == "__main__":
    main()

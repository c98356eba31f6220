"""Golden fixtures for kvsketch's model runtime, computed by transformers' own implementations.

    .venv-train/bin/python training/golden_fixtures.py tests/data/models     tiny random models
    .venv-torch/bin/python training/golden_fixtures.py tests/data/models --only qwen3_bf16
    .venv-train/bin/python training/golden_fixtures.py --model models/NAME    a trained model

A trained model also gets golden_perplexity.json: transformers' perplexity over the first windows
of data/validation-text.txt, windowed and scored as `kvsketch perplexity` does.

Tiny models (random weights, seeded) cover what the trained reference models do not: llama3 and
linear RoPE scaling, an explicit head_dim unlike hidden/heads, attention and MLP biases, tied and
untied embeddings, Qwen2's q/k/v bias, Qwen3's per-head q/k norms (in a config as transformers 5
writes it), Mistral, f32/f16/bf16 weights and sharded checkpoints. Each folder gets
golden.safetensors: for every prompt `promptN.ids` (token ids as F32) and `promptN.logits`
([tokens][vocab], float32, every position), from the model run in float32.
"""
import argparse
import json
import math
import os

import torch
import transformers
from safetensors.torch import save_file

TINY = {
    "llama_f32": ("llama", dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                                tie_word_embeddings=False, rms_norm_eps=1e-6), torch.float32, None),
    "llama3_scaled_bf16_sharded": ("llama", dict(
        vocab_size=288, hidden_size=96, intermediate_size=192, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, attention_bias=True, mlp_bias=True, tie_word_embeddings=True,
        rope_theta=500000.0, max_position_embeddings=1024, rms_norm_eps=1e-5,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 64}), torch.bfloat16, "200KB"),
    "llama_linear_rope_f16": ("llama", dict(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=2, rope_scaling={"type": "linear", "factor": 4.0}, tie_word_embeddings=False),
        torch.float16, None),
    "qwen2_f16": ("qwen2", dict(vocab_size=300, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, rope_theta=1000000.0,
                                tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6),
                  torch.float16, None),
    "mistral_f32": ("mistral", dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=8, num_key_value_heads=2, sliding_window=None,
                                    tie_word_embeddings=False), torch.float32, None),
    # transformers 5 writes rope_parameters and layer_types: made with .venv-torch (--only qwen3_bf16).
    "qwen3_bf16": ("qwen3", dict(vocab_size=320, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, head_dim=32, attention_bias=True,
                                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                                 tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6),
                   torch.bfloat16, None),
}
# Resolved when used: Qwen3 needs transformers >= 4.51, the others run on the pinned 4.46.
CONFIGS = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "mistral": "MistralConfig", "qwen3": "Qwen3Config"}
# transformers 5 renamed from_pretrained's torch_dtype to dtype.
DTYPE = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def write_golden(model, folder, prompts):
    """Logits of every prompt from `model` in float32."""
    model = model.float().eval()
    tensors = {}
    with torch.no_grad():
        for i, ids in enumerate(prompts):
            logits = model(input_ids=torch.tensor([ids])).logits[0].float()
            tensors[f"prompt{i}.ids"] = torch.tensor(ids, dtype=torch.float32)
            tensors[f"prompt{i}.logits"] = logits.contiguous()
    save_file(tensors, os.path.join(folder, "golden.safetensors"),
              metadata={"transformers": transformers.__version__, "torch": torch.__version__})


def tiny(out, only=None):
    for name, (kind, fields, dtype, shard) in TINY.items():
        if only and name not in only:
            continue
        if not hasattr(transformers, CONFIGS[kind]):
            raise SystemExit(f"{name}: transformers {transformers.__version__} has no {CONFIGS[kind]}; "
                             "run with .venv-torch (scripts/setup_torch.sh)")
        torch.manual_seed(sum(map(ord, name)))
        config = getattr(transformers, CONFIGS[kind])(attn_implementation="eager", **fields)
        model = transformers.AutoModelForCausalLM.from_config(config)
        with torch.no_grad():  # weights large enough that every layer matters to the logits
            for p in model.parameters():
                p.normal_(0.0, 0.08 if p.dim() > 1 else 0.3)
                if p.dim() == 1 and p.shape[0] in (config.hidden_size, getattr(config, "head_dim", 0) or -1):
                    p.add_(1.0)
        folder = os.path.join(out, name)
        os.makedirs(folder, exist_ok=True)
        model.to(dtype).save_pretrained(folder, safe_serialization=True, max_shard_size=shard or "1GB")
        generator = torch.Generator().manual_seed(7)
        lengths = [9, 41] + ([150] if "scaled" in name else [])
        prompts = [torch.randint(0, config.vocab_size, (n,), generator=generator).tolist() for n in lengths]
        # Reload what was saved, so the logits come from the committed (rounded) weights.
        write_golden(transformers.AutoModelForCausalLM.from_pretrained(folder, **{DTYPE: torch.float32}), folder,
                     prompts)
        print(name, sum(p.numel() for p in model.parameters()), "parameters")


def golden_perplexity(model, tokenizer, folder, text_path, context=512, windows=4):
    """Perplexity as `kvsketch perplexity` computes it: windows of `context` tokens (BOS and
    context - 1 text tokens), the second half of each scored."""
    with open(text_path, encoding="utf-8") as f:
        tokens = tokenizer.encode(f.read(), add_special_tokens=False).ids
    bos = model.config.bos_token_id
    body = context - 1 if bos is not None else context
    nll, count = 0.0, 0
    with torch.no_grad():
        for w in range(windows):
            ids = ([bos] if bos is not None else []) + tokens[w * body:(w + 1) * body]
            logits = model(input_ids=torch.tensor([ids])).logits[0].double()
            logp = torch.log_softmax(logits, dim=-1)
            for i in range(context // 2, context - 1):
                nll -= float(logp[i, ids[i + 1]])
                count += 1
    with open(os.path.join(folder, "golden_perplexity.json"), "w") as f:
        json.dump({"text": os.path.basename(text_path), "context": context, "windows": windows, "tokens": count,
                   "ppl": math.exp(nll / count)}, f, indent=1)


def trained(folder, text_path):
    from tokenizers import Tokenizer
    tokenizer = Tokenizer.from_file(os.path.join(folder, "tokenizer.json"))
    texts = ["The quick brown fox jumps over the lazy dog. A dictionary defines words;",
             "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
             "Remember these pairs: river 412, candle 88, orbit 731.\nRecall: orbit 731, river"]
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, **{DTYPE: torch.float32})
    write_golden(model, folder, [tokenizer.encode(t).ids for t in texts])
    golden_perplexity(model, tokenizer, folder, text_path)
    with open(os.path.join(folder, "golden_prompts.json"), "w") as f:
        json.dump(texts, f, indent=1, ensure_ascii=False)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", help="folder for the tiny models")
    parser.add_argument("--model", help="a trained model folder to add golden logits to")
    parser.add_argument("--only", nargs="+", choices=sorted(TINY), help="make only these tiny models")
    parser.add_argument("--text", default="data/validation-text.txt", help="text of the golden perplexity")
    args = parser.parse_args()
    if args.model:
        trained(args.model, args.text)
    else:
        tiny(args.out, args.only)

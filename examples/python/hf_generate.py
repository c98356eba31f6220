#!/usr/bin/env python3
"""Generate with a Hugging Face transformers model through kvsketch's compressed cache.

A small Llama with random weights is built from a config (nothing is downloaded); with a real
checkpoint, use AutoModelForCausalLM.from_pretrained(path, attn_implementation=kvsketch.hf.ATTENTION).

    bash scripts/setup_torch.sh
    .venv-torch/bin/python examples/python/hf_generate.py
"""
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

import kvsketch.hf

torch.manual_seed(0)
config = LlamaConfig(vocab_size=1000, hidden_size=512, intermediate_size=1024, num_hidden_layers=4,
                     num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=2048)
model = LlamaForCausalLM(config).eval()
prompt = torch.randint(1, config.vocab_size, (2, 600))  # a batch of two prompts
settings = dict(attention_mask=torch.ones_like(prompt), pad_token_id=0, max_new_tokens=32, do_sample=False)

# The reference: transformers' own cache, float32 keys and values.
model.set_attn_implementation("sdpa")
exact = model.generate(prompt, cache=DynamicCache(config=config), **settings)

# The same model attending through kvsketch: 3-bit TurboQuant keys and values, fp16 sinks and window.
model.set_attn_implementation(kvsketch.hf.ATTENTION)
cache = kvsketch.hf.Cache(config, policy="tq_mse:b=3|window=64")
ours = model.generate(prompt, cache=cache, **settings)

tokens = cache.get_seq_length()
head_dim = config.hidden_size // config.num_attention_heads
fp16_bytes = 2 * config.num_hidden_layers * config.num_key_value_heads * head_dim * 2 * tokens * prompt.shape[0]
agree = (ours[:, -32:] == exact[:, -32:]).float().mean().item()
print(f"{prompt.shape[0]} sequences of {tokens} tokens: the compressed cache holds {cache.bytes()} bytes, "
      f"{fp16_bytes / cache.bytes():.2f}x fewer than fp16; {agree:.0%} of the generated tokens equal DynamicCache's")

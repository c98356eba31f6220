#!/usr/bin/env bash
# Trains a reference model as it is committed (models/llama-reference, models/qwen2-reference), then
# writes its golden fixtures (transformers' logits and perplexity) beside the weights.
#
# The recipe (docs/RESULTS.md, "The committed model's run"): 5000 steps of 4096 tokens, a
# cosine schedule from 3e-3. The first 300 steps are random-token rows whose copies are known, with
# two heads' attention supervised towards the induction circuit (training/attention_supervision.py);
# without that warm-up the model never learns retrieval at this budget. Then contexts of 256, 512,
# 1024 and 2048 tokens (half the steps at 2048) of English text mixed with passkeys, multi-key
# needles, MQAR, repeated spans and random-token copies, with needle and MQAR keys of up to 8 tokens.
# PyTorch 2 with bf16 autocast and torch.compile: about an hour on two cores. Needs
# scripts/setup_training.sh with TORCH=pypi.
set -euo pipefail
cd "$(dirname "$0")/.."
# The first argument picks the preset (llama: models/llama-reference; qwen2: models/qwen2-reference,
# q/k/v bias, one KV head for three query heads, byte-level BPE); the second the folder.
preset=${1:-llama}
out=${2:-models/$preset-reference}
# The committed models use seed 0; SEED picks another (when retrieval forms varies with it).
seed=${SEED:-0}
mix='{"text":0.3,"passkey":0.2,"needles":0.1,"mqar":0.25,"repeat":0.05,"tokens":0.1}'
curriculum="[[0.06,64,{\"tokens\":1.0}],[0.16,256,$mix],[0.14,512,$mix],[0.14,1024,$mix],[0.5,2048,$mix]]"
mkdir -p "$out"
.venv-train/bin/python training/train.py --model "$preset" --out "$out" --steps 5000 --seed "$seed" --curriculum "$curriculum" \
  --supervised-steps 300 --max-key-tokens 8 --probe-every 500 --autocast bf16 --compile --attention sdpa \
  2>&1 | tee "$out.log"
mv "$out.log" "$out/training.log"
.venv-train/bin/python training/golden_fixtures.py --model "$out"

#!/usr/bin/env bash
# Trains models/llama-retrieval as it is committed, in three runs that continue one another:
#   1. language and a first pass at retrieval: 1000 steps of a 1500-step schedule, contexts 256-1024
#   2. induction: 200 steps at 256 tokens, mostly copying word lists (the skill retrieval rests on,
#      which run 1 had not found)
#   3. retrieval at length: 900 steps, passkey, needles, MQAR, copies and text, contexts 256-2048
# then writes the golden fixtures (transformers' logits and perplexity) beside the weights.
# Needs scripts/setup_training.sh; about 60 minutes on two cores.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv-train/bin/python
scratch=$(mktemp -d)
out=${1:-models/llama-retrieval}
$python training/train.py --model llama --out "$scratch/run1" --steps 1500 --stop-after 1000
$python training/train.py --model llama --init "$scratch/run1" --out "$scratch/run2" --steps 200 --lr 2e-3 \
  --mix '{"copy": 0.6, "mqar": 0.2, "passkey": 0.2}' --curriculum '[[1.0, 256]]' --validation-samples 4
$python training/train.py --model llama --init "$scratch/run2" --out "$out" --steps 900 --lr 2e-3 \
  --mix '{"text": 0.1, "passkey": 0.25, "needles": 0.1, "mqar": 0.2, "repeat": 0.1, "copy": 0.25}' \
  --curriculum '[[0.35, 256], [0.25, 512], [0.2, 1024], [0.2, 2048]]'
for run in run1 run2; do cp "$scratch/$run/training.json" "$out/training_$run.json"; done
$python training/golden_fixtures.py --model "$out"
rm -rf "$scratch"

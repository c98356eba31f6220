#!/usr/bin/env bash
# Trains a reference model as it is committed (models/llama-reference, models/qwen2-reference), then
# writes its golden fixtures (transformers' logits and perplexity) beside the weights: 1000 steps of
# train.py's default 1500-step schedule
# (4096 tokens a step, contexts 256 to 1024, English text mixed with passkeys, needles, MQAR and
# repeated spans), about 25 minutes on two cores. Needs scripts/setup_training.sh.
# The model has not learned retrieval at this budget (docs/RESULTS.md); train.py's --init, --mix and
# --curriculum continue a run with other data, for a longer run where more compute is at hand.
set -euo pipefail
cd "$(dirname "$0")/.."
# The first argument picks the preset (llama: models/llama-reference; qwen2: models/qwen2-reference,
# q/k/v bias, one KV head for three query heads, byte-level BPE); the second the folder.
preset=${1:-llama}
out=${2:-models/$preset-reference}
.venv-train/bin/python training/train.py --model "$preset" --out "$out" --steps 1500 --stop-after 1000 \
  2>&1 | tee "$out.log"
mv "$out.log" "$out/training.log"
.venv-train/bin/python training/golden_fixtures.py --model "$out"

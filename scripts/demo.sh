#!/usr/bin/env bash
# The main job on bundled data: installs, builds, runs the reference model through the compressed
# cache (perplexity and KL divergence against the fp16 cache, passkey retrieval, for the standard
# policies), compares KV cache policies on the built-in synthetic cache, then prints the TurboQuant
# distortion tables on random unit vectors and on the bundled SIFT sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=ON
model=models/llama-reference text=data/validation-text.txt
policies="q8_0;q4_0;kivi:b=4,group=32;kivi:b=2,group=32;tq_mse:b=4|tq_mse:b=4;tq_mse:b=3.5,rescale=1|tq_mse:b=3.5"
policies+=";tq_mse:b=3,rescale=1|tq_mse:b=3;tq_prod:b=3|tq_mse:b=3;tq_mse:b=2.5,rescale=1|tq_mse:b=2.5"
# Centred and rescaled keys and values, the guide's recommendation ("Choosing a policy").
centred() { echo "center:tq_mse:b=$1,rescale=1|center:tq_mse:b=$1,rescale=1"; }
policies+=";$(centred 4);$(centred 3.5);$(centred 3);$(centred 2.5)"
echo "== $model through the cache: perplexity and KL divergence against the fp16 cache (8 windows of 1024 tokens, 3 codec seeds) =="
./build/kvsketch perplexity --model $model --text $text --context 1024 --windows 8 --seeds 3 --policies "$policies"
echo "== $model: passkey retrieval through the cache (4 prompts per cell, up to its trained context) =="
./build/kvsketch retrieval --model $model --text $text --task passkey --contexts 1k,2k --depths 0,0.5,1 \
  --samples 4 --policies "fp16;q4_0;tq_mse:b=3,rescale=1|tq_mse:b=3;$(centred 3.5);$(centred 2.5)"
echo "== $model: decode speed through the cache against fp16 =="
./build/kvsketch bench decode --model $model --text $text --contexts 2k,8k --policies "fp16;q4_0;tq_mse:b=3|tq_mse:b=3;$(centred 3)"
echo "== KV cache policies on the synthetic cache (one KV head, d=128, 4096 tokens, 16 queries per regime) =="
./build/kvsketch attention --synthetic default --tokens 4096
echo "== random unit vectors, d=1536 =="
./build/kvsketch distortion --dim 1536 --bits 1,2,3,4 --codecs tq_mse,tq_prod --vectors 2000 --queries 64 --input random
echo "== bundled SIFT sample (data/sift-5k.tsv, normalized), d=128 =="
# SIFT vectors share a direction: average over 32 rotations (the theorems hold in expectation over them).
./build/kvsketch distortion --bits 1,2,3,4 --codecs tq_mse,tq_prod --vectors 300 --queries 8 --codec-seeds 32 --input data/sift-5k.tsv:ids

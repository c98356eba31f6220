#!/usr/bin/env bash
# The main job on bundled data: installs, builds, compares KV cache policies against fp16 on the
# built-in synthetic cache, then prints the TurboQuant distortion tables on random unit vectors and
# on the bundled SIFT sample.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=ON
echo "== KV cache policies on the synthetic cache (one KV head, d=128, 4096 tokens, 16 queries per regime) =="
./build/kvsketch attention --synthetic default --tokens 4096
echo "== random unit vectors, d=1536 =="
./build/kvsketch distortion --dim 1536 --bits 1,2,3,4 --codecs tq_mse,tq_prod --vectors 2000 --queries 64 --input random
echo "== bundled SIFT sample (data/sift-5k.tsv, normalized), d=128 =="
# SIFT vectors share a direction: average over 32 rotations (the theorems hold in expectation over them).
./build/kvsketch distortion --bits 1,2,3,4 --codecs tq_mse,tq_prod --vectors 300 --queries 8 --codec-seeds 32 --input data/sift-5k.tsv:ids

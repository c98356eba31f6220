#!/usr/bin/env bash
# The CUDA kernels on a GPU machine: builds them (or takes a build made elsewhere), runs their
# tests, the decode benchmark and PyTorch's SDPA at the same shapes, and writes the logs, the JSON
# and a summary to $OUT (default gpu-results/).
#
#   scripts/gpu_check.sh                 build into build-cuda/ here (needs the project's
#                                        dependencies: scripts/setup.sh), then test and measure
#   scripts/gpu_check.sh bundle DIR      on a build machine: build, and copy the test and bench
#                                        programs with the libraries they load into DIR
#   KVSKETCH_GPU_BUNDLE=DIR scripts/gpu_check.sh
#                                        test and measure with a bundle (a GPU machine without
#                                        the build dependencies)
# BENCH_ARGS and SDPA_ARGS pass options to kvsketch_cuda_bench and scripts/sdpa_peer.py.
set -uo pipefail
cd "$(dirname "$0")/.."

build() {
  cmake -S . -B build-cuda -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSKETCH_CUDA=ON -DKVSKETCH_BUILD_TESTS=ON \
    -DKVSKETCH_BUILD_BENCH=OFF >/dev/null && cmake --build build-cuda --target kvsketch_cuda_tests kvsketch_cuda_bench
}

if [ "${1:-}" = "bundle" ]; then
  set -e
  dir=${2:?usage: scripts/gpu_check.sh bundle DIR}
  build
  mkdir -p "$dir/lib"
  cp build-cuda/kvsketch_cuda_tests build-cuda/kvsketch_cuda_bench "$dir/"
  # The shared libraries the programs load beyond the C and C++ runtimes, which a newer system
  # carries in later, compatible versions (the CUDA runtime is linked in).
  ldd build-cuda/kvsketch_cuda_tests build-cuda/kvsketch_cuda_bench | awk '/=> \// {print $3}' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' | xargs -I{} cp -L {} "$dir/lib/"
  exit 0
fi

OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
run=()
if [ -n "${KVSKETCH_GPU_BUNDLE:-}" ]; then
  bin=$KVSKETCH_GPU_BUNDLE
  run=(env "LD_LIBRARY_PATH=$bin/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
else
  build 2>&1 | tail -5 || exit 1
  bin=build-cuda
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw \
  --format=csv >"$OUT/device.csv" 2>&1
status=0
"${run[@]}" "$bin/kvsketch_cuda_tests" --gtest_output="json:$OUT/tests.json" >"$OUT/tests.log" 2>&1 || status=1
grep -E '^\[ (cuda|  FAILED|  PASSED|  SKIPPED) ' "$OUT/tests.log"
# shellcheck disable=SC2086
"${run[@]}" "$bin/kvsketch_cuda_bench" ${BENCH_ARGS:-} >"$OUT/bench.jsonl" 2>"$OUT/bench.err" || status=1
# tq_prod keys (QJL signs of the residual), QJL keys and the 2.5-bit channel split, at two
# contexts and batches.
for pair in "prod tq_prod:b=3 tq_mse:b=3" "qjl qjl tq_mse:b=3" "split tq_mse:b=2.5 tq_mse:b=2.5"; do
  read -r name keys values <<<"$pair"
  "${run[@]}" "$bin/kvsketch_cuda_bench" --keys "$keys" --values "$values" --tokens 32768,131072 --batches 1,32 \
    >"$OUT/bench_$name.jsonl" 2>>"$OUT/bench.err" || status=1
done
# shellcheck disable=SC2086
python3 scripts/sdpa_peer.py ${SDPA_ARGS:-} >"$OUT/sdpa.jsonl" 2>"$OUT/sdpa.err" || echo "sdpa_peer failed" >&2
{
  cat "$OUT/device.csv"
  grep -E '"kind": "(device|bandwidth|encode)"' "$OUT/bench.jsonl"
  sed -n '/^$/,$p' "$OUT/bench.jsonl"
  for name in prod qjl split; do sed -n '/^$/,$p' "$OUT/bench_$name.jsonl"; done
  grep -E '"kind": "sdpa"' "$OUT/sdpa.jsonl" | python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin]
for r in rows: print(f"sdpa {r[\"backend\"]:9s} batch {r[\"batch\"]:3d} tokens {r[\"tokens\"]:7d} {r[\"us\"]:10.1f} us {r[\"GBps\"]:7.1f} GB/s")
'
} >"$OUT/summary.txt" 2>&1
cat "$OUT/summary.txt"
tail -3 "$OUT/bench.err" "$OUT/sdpa.err" 2>/dev/null
exit $status

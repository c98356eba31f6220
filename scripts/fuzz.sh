#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/) with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# into build-asan-clang/ (the tree of CXX=clang++ SANITIZE=1 scripts/test.sh; or $BUILD_DIR) and
# runs each for FUZZ_SECONDS (default 30), two at a time, from its seed corpus in fuzz/corpus/ (with
# the flags in fuzz/NAME.options, if any: a larger per-input timeout for the spec grammars and the
# cache loader, which build dense sketches and codebooks slowly under the sanitizers). New
# inputs go to a scratch copy. A crash, a leak, a timeout (10 s for one input) or an allocation
# above 2 GB fails the run, with the input saved as $BUILD_DIR/crash-*, timeout-* or oom-*, to
# replay with $BUILD_DIR/NAME_fuzzer FILE. A longer run: FUZZ_SECONDS=3600 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh clang
export BUILD_DIR=${BUILD_DIR:-build-asan-clang} BUILD_TYPE=RelWithDebInfo CXX=clang++
bash scripts/build.sh -DKVSKETCH_SANITIZE=ON -DKVSKETCH_FUZZ=ON -DKVSKETCH_BUILD_BENCH=OFF
seconds=${FUZZ_SECONDS:-30}
export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fuzz_one() {
  local name=$1
  mkdir -p "$scratch/$name"
  local extra=()  # a target's own flags, after the defaults (the last of a flag wins)
  [ -f "fuzz/$name.options" ] && read -r -a extra < "fuzz/$name.options"
  if "$BUILD_DIR/${name}_fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$BUILD_DIR/" "${extra[@]}" "$scratch/$name" "fuzz/corpus/$name" \
       > "$scratch/$name.log" 2>&1; then
    echo "fuzz: $name passed: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$scratch/$name.log" | tail -n 1 | grep -o '[0-9]*$') inputs in ${seconds}s"
  else
    tail -n 60 "$scratch/$name.log"
    echo "fuzz: $name FAILED (the input is saved under $BUILD_DIR/)"
    return 1
  fi
}

names=()
for corpus in fuzz/corpus/*/; do names+=("$(basename "$corpus")"); done
status=0
for ((i = 0; i < ${#names[@]}; i += 2)); do
  pids=()
  for name in "${names[@]:i:2}"; do
    fuzz_one "$name" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
done
exit $status

#!/usr/bin/env bash
# Installs, builds and runs every test. With SANITIZE=1 it builds into build-asan/ with
# AddressSanitizer + UndefinedBehaviorSanitizer instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${SANITIZE:-0}" = "1" ]; then
  export BUILD_DIR=build-asan BUILD_TYPE=RelWithDebInfo
  bash scripts/build.sh -DKVSKETCH_SANITIZE=ON -DKVSKETCH_BUILD_BENCH=OFF
else
  bash scripts/build.sh -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=ON
fi
cd "${BUILD_DIR:-build}"
ctest --output-on-failure -j "$(nproc)" --timeout 900

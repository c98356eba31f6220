#!/usr/bin/env bash
# Installs kvsketch's dependencies from Debian packages (Debian 12 "bookworm"; GCC 12 and CMake
# 3.25 from it). Idempotent: when every package asked for is present it does nothing (no network).
#   bash scripts/setup.sh              the library, the CLI, the tests and benchmarks (Open MPI for
#                                      the sharded IVF index)
#   bash scripts/setup.sh extras       also FAISS (ann eval --baselines faiss) and the Fashion-MNIST
#                                      dataset (ann eval --data fashion-mnist), evaluation extras
#   bash scripts/setup.sh clang        also clang with its sanitizer and libFuzzer runtimes
# Groups combine: bash scripts/setup.sh extras clang
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libeigen3-dev libhwy-dev libcli11-dev
          libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libhdf5-dev
          libonig-dev libutf8proc-dev libopenmpi-dev openmpi-bin)
for group in "$@"; do
  case "$group" in
    extras) packages+=(libfaiss-dev libopenblas0-pthread dataset-fashion-mnist) ;;
    clang) packages+=(clang libclang-rt-dev) ;;
    *) echo "setup: unknown group '$group' (extras, clang)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"

#!/usr/bin/env bash
# Installs every build and test dependency of kvsketch from Debian packages. Idempotent: when all
# packages are present it does nothing (no network needed).
set -euo pipefail
packages=(build-essential cmake ninja-build pkg-config libeigen3-dev libhwy-dev libcli11-dev
          libfmt-dev nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev zlib1g-dev libhdf5-dev
          libfaiss-dev dataset-fashion-mnist)
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

#!/usr/bin/env bash
# Installs the library from build/ (or $BUILD_DIR) into a scratch prefix and builds examples/
# against it twice, as users would: with CMake's find_package(kvsketch), and with pkg-config (the
# shared library, then the static one); each example must run and succeed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cmake --install "$build" --prefix "$scratch/prefix" >/dev/null
cmake -S examples -B "$scratch/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/cmake" >/dev/null
export PKG_CONFIG_PATH="$scratch/prefix/lib/pkgconfig"
(cd "$scratch" && LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/cmake/engine_decode")
for example in examples/*.cpp; do
  name=$(basename "$example" .cpp)
  g++ -O2 -Wall -Wextra -Werror "$example" $(pkg-config --cflags --libs kvsketch) -o "$scratch/$name-shared"
  g++ -O2 "$example" $(pkg-config --cflags kvsketch) "$scratch/prefix/lib/libkvsketch.a" \
    $(pkg-config --static --libs-only-other kvsketch) -lfmt -lhwy -lz -o "$scratch/$name-static"
  (cd "$scratch" && LD_LIBRARY_PATH="$scratch/prefix/lib" "./$name-shared" >/dev/null && "./$name-static" >/dev/null)
done
echo "install: find_package and pkg-config builds of examples/ run"

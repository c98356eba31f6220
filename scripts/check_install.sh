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
(cd "$scratch" && LD_LIBRARY_PATH="$scratch/prefix/lib" "$scratch/cmake/engine_decode_c")
if [ -x "$scratch/cmake/sharded_search" ]; then
  # Two ranks on this machine; root and more ranks than cores allowed, as in CI containers.
  OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none timeout 120 mpirun -np 2 "$scratch/cmake/sharded_search" >/dev/null
fi
for example in examples/*.cpp; do
  name=$(basename "$example" .cpp)
  g++ -O2 -Wall -Wextra -Werror "$example" $(pkg-config --cflags --libs kvsketch) -o "$scratch/$name-shared"
  g++ -O2 "$example" $(pkg-config --cflags kvsketch) "$scratch/prefix/lib/libkvsketch.a" \
    $(pkg-config --static --libs-only-other kvsketch) -lfmt -lhwy -lz -o "$scratch/$name-static"
  (cd "$scratch" && LD_LIBRARY_PATH="$scratch/prefix/lib" "./$name-shared" >/dev/null && "./$name-static" >/dev/null)
done
for example in examples/*.c; do
  name=$(basename "$example" .c)
  gcc -std=c99 -pedantic -O2 -Wall -Wextra -Werror "$example" $(pkg-config --cflags-only-I --libs kvsketch) -lm -o "$scratch/$name-shared"
  (cd "$scratch" && LD_LIBRARY_PATH="$scratch/prefix/lib" "./$name-shared" >/dev/null)
done
# The shared library exports the C ABI and the public headers' API, nothing internal, under a
# SONAME.
library=$(ls "$scratch"/prefix/lib/libkvsketch.so.*.* | head -1)
symbols=$(nm -D --defined-only "$library" | c++filt)
# (names only: VectorCodec's row hooks still take simd types as parameters)
if grep -E '^[0-9a-f]+ [A-Za-z] (kvsketch::(simd|capi|detail)::|kvsketch::(TurboQuant|QuadRowsCodec|CenteredCodec)|fmt::|hwy::)' <<<"$symbols"; then
  echo "check_install: the shared library exports internal symbols (above)" >&2
  exit 1
fi
for function in $(grep -oE '\bkvs_[a-z0-9_]+\(' include/kvsketch/kvsketch.h | tr -d '(' | sort -u); do
  grep -qE " ${function}\$" <<<"$symbols" || { echo "check_install: $function is not exported" >&2; exit 1; }
done
readelf -d "$library" | grep -q 'SONAME.*libkvsketch\.so\.0\.1' || { echo "check_install: no SONAME" >&2; exit 1; }
echo "install: find_package and pkg-config builds of examples/ run"

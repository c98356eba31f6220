#!/usr/bin/env bash
# Builds the library and its test suite for 64-bit Arm (aarch64) with Debian's cross toolchain and
# runs the tests under qemu-user: Highway's Arm targets (NEON, SVE, SVE2 as qemu offers them) in
# place of the x86 ones, the proof that no x86 intrinsic is needed. Into build-aarch64/.
#   bash scripts/cross_aarch64.sh            # the whole suite through ctest: hours under emulation
#   QUICK=1 bash scripts/cross_aarch64.sh    # the suite less its slowest tests and the CLI's, ~20 min
#   CTEST_ARGS="-R PagedKVCache" bash scripts/cross_aarch64.sh
# Not part of .ci/run (an emulated run is about 60x slower than a native one); PORTABLE=1
# scripts/test.sh is. One OpenMP thread per test: spinning threads crawl under qemu-user.
# libonig-dev and libhdf5-dev cannot be installed for two architectures at once (each replaces the
# other's files), so their arm64 headers are unpacked into build-aarch64/sysroot instead, and
# pkg-config files there point at links to the arm64 runtime libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build-aarch64
sysroot=$PWD/$out/sysroot
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
dpkg --print-foreign-architectures | grep -qx arm64 || { $SUDO dpkg --add-architecture arm64; $SUDO apt-get update -qq; }
packages=(g++-aarch64-linux-gnu qemu-user libc6:arm64 libhwy-dev:arm64 libfmt-dev:arm64 libgtest-dev:arm64
          zlib1g-dev:arm64 libutf8proc-dev:arm64 libonig5:arm64 libhdf5-103-1:arm64 libgomp1:arm64)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
mkdir -p "$sysroot/debs" "$sysroot/pkgconfig"
if [ ! -d "$sysroot/usr/include/hdf5/serial" ]; then
  (cd "$sysroot/debs" && apt-get download -qq libhdf5-dev:arm64)
  dpkg -x "$sysroot"/debs/libhdf5-dev_*_arm64.deb "$sysroot"
fi
arm=/usr/lib/aarch64-linux-gnu
mkdir -p "$sysroot/lib"
ln -sf "$arm/libhdf5_serial.so.103" "$sysroot/lib/libhdf5.so"
ln -sf "$arm/libonig.so.5" "$sysroot/lib/libonig.so"
cat > "$sysroot/pkgconfig/hdf5.pc" <<PC
Name: hdf5
Description: HDF5 (arm64 headers unpacked, arm64 runtime)
Version: 1.10
Cflags: -I$sysroot/usr/include/hdf5/serial
Libs: -L$sysroot/lib -lhdf5
PC
cat > "$sysroot/pkgconfig/oniguruma.pc" <<PC
Name: oniguruma
Description: Oniguruma (the architecture-independent header, arm64 runtime)
Version: 6.9
Cflags:
Libs: -L$sysroot/lib -lonig
PC
export PKG_CONFIG_LIBDIR="$sysroot/pkgconfig:$arm/pkgconfig:/usr/share/pkgconfig"
cmake -S . -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=OFF -DKVSKETCH_MPI=OFF -DKVSKETCH_CUDA=OFF -DKVSKETCH_PYTHON=OFF
cmake --build "$out" -j "$(nproc)"
file "$out/kvsketch_tests"
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
if [ "${QUICK:-0}" = "1" ]; then
  # Tests that take over 0.4 s natively (60x that emulated), and those that start the command-line
  # tool as a child process (an aarch64 binary the host cannot exec without binfmt_misc).
  slow="SparseClaims.*:IntIndexKernels.SameBitsAsReferenceOnEveryTarget:IntIndexKernels.FusedAttention*"
  slow+=":ReferenceModel.*:ReferenceModelCommands.*:Cli.*:MagicPig.InclusionProbability*:MagicPig.Cap*"
  slow+=":Distortion.ProdIsUnbiased*:Selectors.Concurrent*:EqualBytes.*:Codec.MultiQueryForms*"
  slow+=":Rotation.ApplyScaled*:PagedKVCache.TruncateThenAppend*:PagedKVCache.WarmDecodeAllocatesNothing"
  slow+=":BadInput.NonFiniteStoredValues*:Codec.QueryTimeOperations*:RowKernels.ScoresAndWeightedSums*"
  qemu-aarch64 -L /usr/aarch64-linux-gnu "$out/kvsketch_tests" --gtest_brief=1 "--gtest_filter=-$slow"
else
  # shellcheck disable=SC2086
  (cd "$out" && ctest --output-on-failure -j "$(nproc)" --timeout 3600 ${CTEST_ARGS:-})
fi

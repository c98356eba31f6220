#!/usr/bin/env bash
# Installs, builds and runs every test, then builds examples/ against the installed package
# (scripts/check_install.sh). With SANITIZE=1 it builds with AddressSanitizer +
# UndefinedBehaviorSanitizer instead, into build-asan/ (GCC) or build-asan-clang/ (CXX=clang++,
# which also builds the fuzz targets of scripts/fuzz.sh in the same tree), without the MPI parts
# (Open MPI's own allocations would read as leaks). With PORTABLE=1 it
# builds Highway's portable target alone (no x86 intrinsics) into build-portable/.
set -euo pipefail
cd "$(dirname "$0")/.."
# The evaluation extras too (FAISS, Fashion-MNIST), so that the tests of those paths run; clang
# for its builds.
if [[ "${CXX:-}" == *clang* ]]; then bash scripts/setup.sh extras clang; else bash scripts/setup.sh extras; fi
# The C test program links the same sanitizer runtime as the library: C and C++ by one compiler.
if [[ "${CXX:-}" == *clang++* ]]; then export CC=${CC:-${CXX/clang++/clang}}; fi
if [ "${PORTABLE:-0}" = "1" ]; then
  # Highway's portable target alone: no x86 kernels, no CPUID or AMX (KVSKETCH_PORTABLE).
  export BUILD_DIR=${BUILD_DIR:-build-portable}
  bash scripts/build.sh -DKVSKETCH_PORTABLE=ON -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=OFF
elif [ "${SANITIZE:-0}" = "1" ]; then
  export BUILD_TYPE=RelWithDebInfo
  export LSAN_OPTIONS="suppressions=$PWD/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
  if [[ "${CXX:-}" == *clang* ]]; then
    export BUILD_DIR=${BUILD_DIR:-build-asan-clang}
    bash scripts/build.sh -DKVSKETCH_SANITIZE=ON -DKVSKETCH_FUZZ=ON -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=OFF \
      -DKVSKETCH_MPI=OFF
  else
    export BUILD_DIR=${BUILD_DIR:-build-asan}
    bash scripts/build.sh -DKVSKETCH_SANITIZE=ON -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=OFF -DKVSKETCH_MPI=OFF
  fi
else
  # The CUDA kernels too wherever nvcc is, so that they always compile; their tests that need a
  # GPU skip themselves without one (scripts/gpu_check.sh runs them on a GPU machine).
  cuda=()
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  [ -n "$nvcc" ] && cuda=(-DKVSKETCH_CUDA=ON "-DCMAKE_CUDA_COMPILER=$nvcc")
  # The Python module, built with .venv's interpreter (pinned pybind11, NumPy, pytest from PyPI)
  # and tested with pytest through CTest.
  bash scripts/setup_python.sh
  # kvsketch.torch and kvsketch.hf: PyTorch and transformers in .venv-torch, kvsketch installed into
  # it by pip from this checkout (its own build, in build-pip/). PyTorch's PyPI wheels bring CUDA's
  # libraries: about 9 GB at the install's peak. On a disk with less free, those two modules' tests
  # are left out, loudly, rather than failing the install halfway and every test after it.
  torch=("-DKVSKETCH_TORCH_PYTHON=")
  free_gb=$(( $(df -Pk . | awk 'NR==2 {print $4}') / 1024 / 1024 ))
  if [ -x .venv-torch/bin/python ] || [ "$free_gb" -ge "${TORCH_MIN_FREE_GB:-10}" ]; then
    bash scripts/setup_torch.sh
    torch=("-DKVSKETCH_TORCH_PYTHON=$PWD/.venv-torch/bin/python")
  else
    echo "test.sh: WARNING: ${free_gb} GB free on this disk, under the ${TORCH_MIN_FREE_GB:-10} GB that" \
      "PyTorch's install needs: the kvsketch.torch and kvsketch.hf tests are NOT run" >&2
  fi
  bash scripts/build.sh -DKVSKETCH_BUILD_TESTS=ON -DKVSKETCH_BUILD_BENCH=ON "${cuda[@]}" \
    -DKVSKETCH_PYTHON=ON "-DPython_EXECUTABLE=$PWD/.venv/bin/python" "${torch[@]}"
fi
(cd "${BUILD_DIR:-build}" && ctest --output-on-failure -j "$(nproc)" --timeout 900)
# The installed package, as a user's project builds against it (release builds).
if [ "${SANITIZE:-0}" != "1" ] && [ "${PORTABLE:-0}" != "1" ]; then bash scripts/check_install.sh; fi

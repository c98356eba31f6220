#!/usr/bin/env bash
# Creates .venv-torch/ for kvsketch.torch and kvsketch.hf: pinned PyTorch (CPU use; PyPI's wheel) and
# Hugging Face transformers from PyPI, from the python3 on PATH (or $PYTHON), then installs the
# kvsketch package into it from this checkout with pip (pyproject.toml: the project's CMake through
# scikit-build-core, built for that interpreter). Idempotent: the pins install once; the package
# reinstalls, rebuilding only what changed (build-pip/).
#   bash scripts/setup_torch.sh && .venv-torch/bin/python -m pytest python/tests
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
# transformers 5.24.0 is the release these were tested with; torch 2.15.0 the newest PyTorch.
pins=(torch==2.15.0 transformers==5.24.0 numpy==2.1.3 pytest==8.3.3 scikit-build-core==0.11.6 pybind11==2.13.6)
have_pins() {
  local frozen
  frozen=$(.venv-torch/bin/python -m pip freeze 2>/dev/null) || return 1
  for pin in "${pins[@]}"; do grep -qx "$pin" <<<"$frozen" || grep -q "^${pin}+" <<<"$frozen" || return 1; done
}
if ! have_pins; then
  "$python" -m venv .venv-torch
  # No wheel cache: PyTorch's wheels with their CUDA libraries are about 3 GB, installed 5.6 GB,
  # and a cached copy would double what the install holds on disk at its peak.
  if ! .venv-torch/bin/python -m pip install -q --disable-pip-version-check --no-cache-dir "${pins[@]}"; then
    rm -rf .venv-torch  # a half-installed environment would only hold the disk
    echo "setup_torch: installing ${pins[*]} failed" >&2
    exit 1
  fi
fi
.venv-torch/bin/python -m pip install -q --disable-pip-version-check --no-build-isolation --no-deps .
.venv-torch/bin/python -c "import kvsketch, torch, transformers; print('setup_torch: .venv-torch with kvsketch', \
kvsketch.__file__, 'torch', torch.__version__, 'transformers', transformers.__version__)"

#!/usr/bin/env bash
# Creates .venv/ (for the Python package, its build and its tests) with pinned PyPI packages, from
# the python3 on PATH (or $PYTHON): the build and the tests then use .venv/bin/python, whichever
# interpreter made it. Idempotent: does nothing when .venv has the pins.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
# mpi4py (kvsketch.mpi): its binary wheel loads the MPI library at run time, Debian's Open MPI
# from scripts/setup.sh.
pins=(numpy==2.1.3 pybind11==2.13.6 pytest==8.3.3 mpi4py==4.1.2)
if [ -x .venv/bin/python ]; then
  frozen=$(.venv/bin/python -m pip freeze 2>/dev/null || true)
  missing=0
  for pin in "${pins[@]}"; do grep -qx "$pin" <<< "$frozen" || missing=1; done
  if [ "$missing" = 0 ]; then
    echo "setup_python: .venv has ${pins[*]}"
    exit 0
  fi
fi
"$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check "${pins[@]}"
echo "setup_python: .venv ($(.venv/bin/python --version)) with ${pins[*]}"

#!/usr/bin/env bash
# Creates .venv/ (for the Python package, its build and its tests) with pinned PyPI packages, from
# the python3 on PATH (or $PYTHON): the build and the tests then use .venv/bin/python, whichever
# interpreter made it. Idempotent: does nothing when .venv has the pins.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
pins=(numpy==2.1.3 pybind11==2.13.6 pytest==8.3.3)
if [ -x .venv/bin/python ] && .venv/bin/python -m pip freeze 2>/dev/null | grep -qx "numpy==2.1.3" &&
   .venv/bin/python -m pip freeze | grep -qx "pybind11==2.13.6" && .venv/bin/python -m pip freeze | grep -qx "pytest==8.3.3"; then
  echo "setup_python: .venv has ${pins[*]}"
  exit 0
fi
"$python" -m venv .venv
.venv/bin/python -m pip install -q --disable-pip-version-check "${pins[@]}"
echo "setup_python: .venv ($(.venv/bin/python --version)) with ${pins[*]}"

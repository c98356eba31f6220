#!/usr/bin/env bash
# The peers of `kvsketch ann bench` for scripts/ann/peers.py (not the build or the tests): a venv
# `.venv-bench` over the python3 on PATH with pinned PyPI packages: faiss-cpu (IVF-RaBitQ and its
# fast-scan form, IVF-PQ fast scan, HNSW), hnswlib, h5py and NumPy. Debian's FAISS 1.7.3 is the
# other FAISS, linked into kvsketch itself (scripts/setup.sh extras).
#   bash scripts/setup_bench.sh
#   .venv-bench/bin/python scripts/ann/peers.py --data data/ann/FILE.hdf5 --indexes "IVF1024,RaBitQ"
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
[ -x .venv-bench/bin/python ] || "$python" -m venv .venv-bench
.venv-bench/bin/pip install -q numpy==2.1.3 h5py==3.12.1 faiss-cpu==1.13.0 hnswlib==0.8.0
.venv-bench/bin/python -c "import faiss, hnswlib, h5py; print('setup_bench: faiss', faiss.__version__, 'h5py', h5py.__version__)"

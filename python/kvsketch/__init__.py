"""kvsketch: compressed KV caches and embedding vectors, with attention and search from the codes.

    import kvsketch, numpy as np
    codec = kvsketch.Codec("tq_mse:b=3", 128, seed=0)
    cache = kvsketch.KVCache(layers=32, kv_heads=8, head_dim=128, policy="tq_mse:b=3")
    index = kvsketch.Index(128, codec="tq_pca:b=4", metric="ip")
    ivf = kvsketch.IvfIndex(128, "ivf:nlist=1024,nprobe=32|tq_mse:b=4,rescale=1")
    sparse = kvsketch.SelectionCache(32, 8, 128, "tq_prod:b=3|tq_mse:b=3", "magicpig:K=10,L=150")
    served = kvsketch.PagedSelectionCache(32, 8, 128, "tq_mse:b=3|rollback=8", "magicpig:K=10,L=150")

kvsketch.torch offers the same on CPU torch tensors; kvsketch.hf a Hugging Face transformers cache.
"""
from ._kvsketch import (Calibration, Codec, Error, Index, IvfIndex, KVCache, PagedSelectionCache, SelectionCache,
                        merge_attention)
from .distortion import distortion

__all__ = ["Calibration", "Codec", "Error", "Index", "IvfIndex", "KVCache", "PagedSelectionCache", "SelectionCache",
           "distortion", "merge_attention"]

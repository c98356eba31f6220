"""kvsketch: compressed KV caches and embedding vectors, with attention and search from the codes.

    import kvsketch, numpy as np
    codec = kvsketch.Codec("tq_mse:b=3", 128, seed=0)
    cache = kvsketch.KVCache(layers=32, kv_heads=8, head_dim=128, policy="tq_mse:b=3")
    index = kvsketch.Index(128, codec="tq_pca:b=4", metric="ip")
    ivf = kvsketch.IvfIndex(128, "ivf:nlist=1024,nprobe=32|tq_mse:b=4,rescale=1")
"""
from ._kvsketch import Calibration, Codec, Error, Index, IvfIndex, KVCache, merge_attention
from .distortion import distortion

__all__ = ["Calibration", "Codec", "Error", "Index", "IvfIndex", "KVCache", "distortion", "merge_attention"]

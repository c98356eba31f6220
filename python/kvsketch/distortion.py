"""The papers' distortion measures of a codec, from NumPy: TurboQuant's D_mse and D_prod
(Theorems 1 and 2) on random unit vectors, and the bias of inner products.

    >>> kvsketch.distortion("tq_mse:b=3", dim=128)["mse"]   # about 0.03, the paper's value
"""
import numpy as np

from ._kvsketch import Codec


def unit_vectors(n, dim, seed):
    """n rows uniform on the unit sphere of R^dim, float32."""
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def distortion(spec, dim=128, n=4000, queries=64, seed=0, codec_seed=1):
    """D_mse = E||x - x~||^2 and D_prod = E(<y, x> - <y, x~>)^2 over unit x (n of them) and unit y
    (queries), with the standard errors of both and the mean inner-product error (its bias), for the
    codec `spec` at `dim`. Inner products are the codec's own estimates from the codes."""
    codec = Codec(spec, dim, seed=codec_seed)
    x = unit_vectors(n, dim, seed)
    y = unit_vectors(queries, dim, seed + 1)
    codes = codec.encode(x)
    squared = np.sum((codec.decode(codes).astype(np.float64) - x) ** 2, axis=1)
    errors = np.stack([codec.scores(q, codes).astype(np.float64) - x @ q for q in y])
    return {
        "spec": codec.spec,
        "dim": dim,
        "bits_per_value": 8.0 * codec.code_bytes / dim,
        "mse": float(squared.mean()),
        "mse_stderr": float(squared.std(ddof=1) / np.sqrt(n)),
        "prod": float(np.mean(errors ** 2)),
        "prod_stderr": float(np.std(errors.ravel() ** 2, ddof=1) / np.sqrt(errors.size)),
        "bias": float(errors.mean()),
        "bias_stderr": float(errors.std(ddof=1) / np.sqrt(errors.size)),
    }

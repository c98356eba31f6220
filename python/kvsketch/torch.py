"""kvsketch on CPU torch tensors: the classes of `kvsketch` with tensors in and out, without copies.

    import torch, kvsketch.torch as kt
    cache = kt.KVCache(layers=32, kv_heads=8, head_dim=128, policy="tq_mse:b=3")
    s = cache.add_sequence()
    cache.append(s, 0, keys, values)              # (kv_heads, tokens, head_dim) fp32, fp16 or bf16
    out, lse = cache.attention(0, [s], queries)   # (batch, q_heads, head_dim) float32 tensors

Tensors are handed to the compiled module as NumPy views of their memory (bf16 as a uint16 view,
which the module reads as bf16), and arrays come back as tensors over the same memory. Nothing is
converted behind the caller's back: a tensor on another device, or one that is not contiguous, is
refused naming the argument, and a dtype the call does not take is refused by the module (queries
and vectors to encode are float32; keys and values may also be fp16 or bf16).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import _kvsketch
from .distortion import distortion

__all__ = ["Calibration", "Codec", "Error", "Index", "IvfIndex", "KVCache", "PagedSelectionCache", "SelectionCache",
           "as_numpy", "as_tensor", "distortion", "merge_attention"]

Error = _kvsketch.Error
Calibration = _kvsketch.Calibration


def as_numpy(tensor: torch.Tensor, name: str = "tensor") -> np.ndarray:
    """The NumPy view of a CPU tensor's memory (bf16 as uint16); refuses what has no such view."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(f"{name} is on {tensor.device}; kvsketch.torch takes CPU tensors (tensor.cpu())")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} must be contiguous (tensor.contiguous()), got strides {tuple(tensor.stride())}")
    tensor = tensor.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(np.uint16)
    return tensor.numpy()


def as_tensor(value: Any) -> Any:
    """Arrays as tensors over the same memory, inside tuples, lists and dicts too."""
    if isinstance(value, np.ndarray):
        return torch.from_numpy(value)
    if isinstance(value, tuple):
        return tuple(as_tensor(v) for v in value)
    if isinstance(value, list):
        return [as_tensor(v) for v in value]
    if isinstance(value, dict):
        return {k: as_tensor(v) for k, v in value.items()}
    return value


def _arguments(method: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    def convert(value: Any, name: str) -> Any:
        if isinstance(value, torch.Tensor):
            return as_numpy(value, name)
        if isinstance(value, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in value):
            return type(value)(convert(v, f"{name}[{i}]") for i, v in enumerate(value))
        if isinstance(value, dict):
            return {k: convert(v, f"{name}[{k!r}]") for k, v in value.items()}
        return value

    return (tuple(convert(a, f"{method}: argument {i + 1}") for i, a in enumerate(args)),
            {k: convert(v, f"{method}: {k}") for k, v in kwargs.items()})


class _TensorAdapter:
    """Forwards every method of a kvsketch object, tensors in as views and arrays out as tensors."""

    _wrapped_type: type = object

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        args, kwargs = _arguments(self._wrapped_type.__name__, args, kwargs)
        object.__setattr__(self, "_native", self._wrapped_type(*args, **kwargs))

    @classmethod
    def _adopt(cls, native: Any) -> Any:
        adapter = cls.__new__(cls)
        object.__setattr__(adapter, "_native", native)
        return adapter

    @property
    def native(self) -> Any:
        """The NumPy-facing object of `kvsketch` underneath."""
        return self._native

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._native, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = _arguments(name, args, kwargs)
            result = attribute(*args, **kwargs)
            if isinstance(result, self._wrapped_type):
                return type(self)._adopt(result)
            return as_tensor(result)

        call.__doc__ = attribute.__doc__
        return call

    def __contains__(self, item: Any) -> bool:
        return item in self._native

    def __repr__(self) -> str:
        return f"kvsketch.torch.{type(self).__name__}({self._native!r})"


def _adopting(name: str) -> Any:
    """A static method of the wrapped type whose result comes back adopted (load, from_bytes)."""
    def make(cls: Any, *args: Any) -> Any:
        return cls._adopt(getattr(cls._wrapped_type, name)(*args))
    make.__name__ = name
    return classmethod(make)


class Codec(_TensorAdapter):
    """kvsketch.Codec on tensors: encode (n, dim) float32 -> uint8 codes, decode, scores, accumulate."""
    _wrapped_type = _kvsketch.Codec


class KVCache(_TensorAdapter):
    """kvsketch.KVCache on tensors: the paged multi-sequence cache."""
    _wrapped_type = _kvsketch.KVCache

    load = _adopting("load")


class SelectionCache(_TensorAdapter):
    """kvsketch.SelectionCache on tensors: one sequence attended through a token selector."""
    _wrapped_type = _kvsketch.SelectionCache


class PagedSelectionCache(_TensorAdapter):
    """kvsketch.PagedSelectionCache on tensors: sequences of a paged cache, each with its selectors."""
    _wrapped_type = _kvsketch.PagedSelectionCache


class Index(_TensorAdapter):
    """kvsketch.Index on tensors: FAISS's verbs, search -> (D, I) tensors."""
    _wrapped_type = _kvsketch.Index

    load = _adopting("load")


class IvfIndex(_TensorAdapter):
    """kvsketch.IvfIndex on tensors."""
    _wrapped_type = _kvsketch.IvfIndex

    load = _adopting("load")

    from_bytes = _adopting("from_bytes")


def merge_attention(output_a: torch.Tensor, lse_a: torch.Tensor, output_b: torch.Tensor,
                    lse_b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Merges two partial attention results (outputs (..., heads, dim), lse (..., heads)) exactly."""
    args, _ = _arguments("merge_attention", (output_a, lse_a, output_b, lse_b), {})
    return as_tensor(_kvsketch.merge_attention(*args))

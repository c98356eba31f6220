"""A compressed KV cache for Hugging Face transformers, attending from the codes.

    import kvsketch.hf
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation=kvsketch.hf.ATTENTION)
    cache = kvsketch.hf.Cache(model.config, policy="tq_mse:b=3")
    out = model.generate(input_ids, past_key_values=cache, max_new_tokens=64)

Importing this module registers the attention function `kvsketch` with transformers' attention
interface, and its mask function with the mask interface. A layer's step is "attend, then append":
the new chunk's queries attend exactly (float32, causal within the chunk) to the chunk's own keys,
and through kvsketch's decode kernels to the compressed past; the two partial results merge by
log-sum-exp (kvsketch.merge_attention), and then the chunk is appended to the compressed cache.

Each row of the batch is one sequence of a kvsketch.KVCache. Left padding is understood: padded
positions are never appended, so a sequence holds its own tokens only. Beam search and
`num_return_sequences` fork sequences (sealed pages are shared, not copied), and `crop` truncates
them (policy field rollback=N keeps the fp16 of recent encoded tokens for that).
"""
from __future__ import annotations

import math
import threading
from typing import Any

import numpy as np
import torch
from transformers import AttentionInterface, PreTrainedConfig
from transformers.cache_utils import Cache as _HFCache
from transformers.cache_utils import CacheLayerMixin
from transformers.masking_utils import AttentionMaskInterface

from . import _kvsketch
from .torch import as_numpy

__all__ = ["ATTENTION", "Cache", "attention", "exact_attention"]

#: The name to pass as `attn_implementation` (from_pretrained, from_config, set_attn_implementation).
ATTENTION = "kvsketch"

# The chunk a kvsketch cache was handed by a layer's update, which that layer's attention call
# consumes next (per thread: a forward runs its layers in order on one thread).
_handoff = threading.local()


def exact_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, key_valid: torch.Tensor | None,
                    scaling: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Causal attention in float32 of queries (B, Hq, T, D) over keys and values (B, Hkv, S, D), the
    queries being the last T of the S positions; key_valid (B, S) marks keys that are not padding.
    Returns (output (B, Hq, T, D), lse (B, Hq, T)), lse = log sum exp(scaling q.k); a query with no
    key to attend to gets output 0 and lse -inf."""
    b, hq, t, d = query.shape
    hkv, s = key.shape[1], key.shape[2]
    if hq % hkv != 0:
        raise ValueError(f"query heads ({hq}) must be a multiple of key/value heads ({hkv})")
    q = query.float().reshape(b, hkv, hq // hkv * t, d)
    scores = torch.matmul(q, key.float().transpose(-1, -2)).reshape(b, hq, t, s) * scaling
    allowed = torch.ones(t, s, dtype=torch.bool, device=query.device).tril(diagonal=s - t)
    allowed = allowed.expand(b, 1, t, s)
    if key_valid is not None:
        allowed = allowed & key_valid[:, None, None, :].bool()
    scores = scores.masked_fill(~allowed, -math.inf)
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.exp(scores - torch.where(torch.isinf(lse), 0.0, lse)[..., None])
    out = torch.matmul(weights.reshape(b, hkv, hq // hkv * t, s), value.float()).reshape(b, hq, t, d)
    return out, lse


def _merge(out_a: torch.Tensor, lse_a: torch.Tensor, out_b: torch.Tensor, lse_b: torch.Tensor) -> torch.Tensor:
    """Two partial results (..., D) and (...) merged by kvsketch's log-sum-exp merge."""
    shape, d = out_a.shape, out_a.shape[-1]
    merged, _ = _kvsketch.merge_attention(out_a.reshape(-1, d).contiguous().numpy(), lse_a.reshape(-1).contiguous().numpy(),
                                          out_b.reshape(-1, d).contiguous().numpy(), lse_b.reshape(-1).contiguous().numpy())
    return torch.from_numpy(merged).reshape(shape)


def attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
              attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
              **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: (B, Hq, T, D) queries -> (B, T, Hq, D) output. With a
    kvsketch Cache it attends to the compressed past and appends; without one (use_cache=False), it is
    exact attention over the keys and values given."""
    if dropout != 0.0:
        raise ValueError("kvsketch attention is for inference: dropout must be 0 (model.eval())")
    if scaling is None:
        scaling = query.shape[-1] ** -0.5
    key_valid = _padding(attention_mask)
    pending = getattr(_handoff, "pending", None)
    if pending is not None and pending[2] is key:
        _handoff.pending = None
        cache, layer = pending[0], pending[1]
        output = cache._attend_then_append(layer, query, key, value, key_valid, scaling)
    else:
        output, _ = exact_attention(query, key, value, key_valid, scaling)
    return output.to(query.dtype).transpose(1, 2).contiguous(), None


def _padding(attention_mask: Any) -> torch.Tensor | None:
    """The (B, S) key mask of the mask function below, or None."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
        raise ValueError("kvsketch attention takes a 2D padding mask (batch, keys) or None; got a "
                         f"{getattr(attention_mask, 'shape', type(attention_mask).__name__)} mask: load the model with "
                         f"attn_implementation='{ATTENTION}' so that its mask function builds the mask")
    return attention_mask


def _mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
          mask_function: Any = None, attention_mask: torch.Tensor | None = None, **kwargs: Any) -> torch.Tensor | None:
    """transformers' mask interface: causality is the attention's own, so the mask is only the 2D
    padding mask over the keys (batch, kv_length), or None when nothing is padded."""
    if attention_mask is None or bool(attention_mask.all()):
        return None
    padding = attention_mask.bool()
    if padding.shape[-1] != kv_length:
        padding = padding[:, kv_offset:kv_offset + kv_length]
    return padding


AttentionInterface.register(ATTENTION, attention)
AttentionMaskInterface.register(ATTENTION, _mask)


def _model_shape(config: PreTrainedConfig) -> tuple[int, int, int]:
    config = config.get_text_config() if hasattr(config, "get_text_config") else config
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv_heads = getattr(config, "num_key_value_heads", None) or heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    layer_types = getattr(config, "layer_types", None) or ["full_attention"] * layers
    other = sorted({t for t in layer_types if t != "full_attention"})
    if other:
        raise ValueError(f"kvsketch.hf.Cache holds full-attention layers only; this model has {', '.join(other)} layers")
    return layers, kv_heads, head_dim


class _Layer(CacheLayerMixin):
    """One model layer's view of the cache: the chunk handed to the attention, and the length seen."""

    is_compileable = False
    is_sliding = False
    is_croppable = True

    def __init__(self, owner: "Cache", layer: int) -> None:
        super().__init__()
        self.owner, self.layer, self.length = owner, layer, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device, self.dtype = key_states.device, key_states.dtype
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.owner._hand_over(self.layer, key_states)
        self.length += key_states.shape[-2]
        return key_states, value_states

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.length + query_length, 0

    def get_seq_length(self) -> int:
        return self.length

    def get_max_length(self) -> int:
        return -1

    def reset(self) -> None:
        self.length, self.is_initialized = 0, False

    def crop(self, tokens_to_remove: int) -> None:
        pass  # Cache.crop truncates the sequences, every layer at once

    def batch_repeat_interleave(self, repeats: int) -> None:
        pass

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        pass

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        pass


class Cache(_HFCache):
    """A transformers Cache holding keys and values in a kvsketch.KVCache.

    config: the model's config (layers, KV heads, head_dim); policy: kvsketch's policy string
    ("fp16", "tq_mse:b=3", "tq_prod:b=3|tq_mse:b=3|window=64", ...); calibration: a
    kvsketch.Calibration (else each layer is fitted on the first sequence's first tokens); seed: the
    codecs' seed; threads: decode threads (0: all); integer_arithmetic: the fused integer kernels
    (False: float arithmetic, the same as attention over `read` rows up to rounding)."""

    def __init__(self, config: PreTrainedConfig, policy: str = "tq_mse:b=3", calibration: Any = None, seed: int = 0,
                 threads: int = 0, integer_arithmetic: bool = True) -> None:
        layers, kv_heads, head_dim = _model_shape(config)
        if calibration is not None:
            self.kv = _kvsketch.KVCache(calibration)
        else:
            self.kv = _kvsketch.KVCache(layers=layers, kv_heads=kv_heads, head_dim=head_dim, policy=policy, seed=seed)
        self.threads, self.integer_arithmetic = threads, integer_arithmetic
        self.sequences: list[int] = []  # the kvsketch sequence of each batch row
        super().__init__(layers=[_Layer(self, i) for i in range(layers)])

    @classmethod
    def from_cache(cls, other: _HFCache, config: PreTrainedConfig, **kwargs: Any) -> "Cache":
        """A kvsketch Cache holding what another transformers cache holds (a DynamicCache after a
        prefill, say): every layer's keys and values (batch, kv_heads, tokens, head_dim), unpadded,
        appended to one sequence per row. kwargs as for Cache()."""
        cache = cls(config, **kwargs)
        if len(other.layers) != len(cache.layers):
            raise ValueError(f"the cache holds {len(other.layers)} layers; the config has {len(cache.layers)}")
        for layer, source in enumerate(other.layers):
            keys, values = getattr(source, "keys", None), getattr(source, "values", None)
            if keys is None or keys.dim() != 4:
                raise ValueError(f"layer {layer} of the cache holds no (batch, heads, tokens, head_dim) keys")
            if not cache.sequences:
                cache.sequences = [cache.kv.add_sequence() for _ in range(keys.shape[0])]
            if keys.shape[0] != len(cache.sequences):
                raise ValueError(f"layer {layer} holds a batch of {keys.shape[0]}; layer 0 one of {len(cache.sequences)}")
            for row, s in enumerate(cache.sequences):
                cache.kv.append(s, layer, as_numpy(keys[row].contiguous(), "keys"),
                                as_numpy(values[row].contiguous(), "values"))
            target = cache.layers[layer]
            target.lazy_initialization(keys, values)
            target.length = keys.shape[2]
        return cache

    # --- what generate() and the model call -------------------------------------------------------

    @property
    def batch_size(self) -> int:
        return len(self.sequences) if self.sequences else -1

    def bytes(self) -> int:
        """Bytes the compressed cache holds (pages once, fp16 sinks and windows, calibration)."""
        return self.kv.bytes()

    def reset(self) -> None:
        for s in self.sequences:
            self.kv.remove_sequence(s)
        self.sequences = []
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        """Drops the last -tokens_to_remove positions of every row (speculative decoding's rollback),
        or keeps the first tokens_to_remove when it is positive (the older convention)."""
        length = self.layers[0].length
        keep = length + tokens_to_remove if tokens_to_remove < 0 else min(tokens_to_remove, length)
        drop = length - max(keep, 0)
        if drop == 0:
            return
        for s in self.sequences:  # checked first: a refused truncate leaves every row as it was
            if self.kv.tokens(s, 0) < drop:
                raise ValueError(f"crop: a row holds {self.kv.tokens(s, 0)} tokens; {drop} cannot be dropped")
        for s in self.sequences:
            self.kv.truncate(s, self.kv.tokens(s, 0) - drop)
        for layer in self.layers:
            layer.length -= drop

    def batch_repeat_interleave(self, repeats: int) -> None:
        self._select([i for i in range(len(self.sequences)) for _ in range(repeats)])

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._select([int(i) for i in indices.reshape(-1)])

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._select([int(i) for i in beam_idx.reshape(-1)])

    # --- kvsketch's side ----------------------------------------------------------------------------

    def read(self, layer: int, row: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A row's keys and values of a layer as the cache holds them: (kv_heads, tokens, head_dim)."""
        keys, values = self.kv.read(self.sequences[row], layer)
        return torch.from_numpy(keys), torch.from_numpy(values)

    def _select(self, rows: list[int]) -> None:
        """Rows become the given old rows (repeats fork, the first use keeps the sequence)."""
        if any(r < 0 or r >= len(self.sequences) for r in rows):
            raise ValueError(f"batch rows {rows} out of range for a batch of {len(self.sequences)}")
        used: set[int] = set()
        chosen = []
        for r in rows:
            s = self.sequences[r]
            chosen.append(self.kv.fork(s) if s in used else s)
            used.add(s)
        for s in self.sequences:
            if s not in used:
                self.kv.remove_sequence(s)
        self.sequences = chosen

    def _hand_over(self, layer: int, key_states: torch.Tensor) -> None:
        pending = getattr(_handoff, "pending", None)
        if pending is not None:
            _handoff.pending = None
            raise RuntimeError("kvsketch.hf.Cache: layer {} was appended to, but the model did not attend through "
                               "kvsketch: load the model with attn_implementation='{}' (kvsketch.hf.ATTENTION), or "
                               "call model.set_attn_implementation('{}')".format(pending[1], ATTENTION, ATTENTION))
        if not self.sequences:
            self.sequences = [self.kv.add_sequence() for _ in range(key_states.shape[0])]
        elif key_states.shape[0] != len(self.sequences):
            raise ValueError(f"kvsketch.hf.Cache holds a batch of {len(self.sequences)}; got keys for {key_states.shape[0]}")
        _handoff.pending = (self, layer, key_states)

    def _attend_then_append(self, layer: int, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            key_valid: torch.Tensor | None, scaling: float) -> torch.Tensor:
        t = query.shape[2]
        chunk_valid = None if key_valid is None else key_valid[:, -t:]
        past = [self.kv.tokens(s, layer) for s in self.sequences]  # tokens each row holds
        if key_valid is not None:
            held = key_valid[:, :-t].sum(dim=1).tolist()
            for row in range(len(self.sequences)):
                if held[row] != past[row]:
                    raise ValueError(
                        f"kvsketch.hf: the attention mask marks {held[row]} past tokens of row {row} as real, but the cache "
                        f"holds {past[row]}: only left padding is understood (padding is never appended, "
                        "and a held token cannot be masked later)")
        output, lse = exact_attention(query, key, value, chunk_valid, scaling)
        if any(past):
            past_out, past_lse = self._past_attention(layer, query, scaling, past)
            output = _merge(output.transpose(1, 2), lse.transpose(1, 2), past_out, past_lse).transpose(1, 2)
        for i, s in enumerate(self.sequences):
            k, v = key[i], value[i]  # (Hkv, T, D)
            if chunk_valid is not None and not bool(chunk_valid[i].all()):
                k, v = k[:, chunk_valid[i]], v[:, chunk_valid[i]]
            if k.shape[1] > 0:
                self.kv.append(s, layer, as_numpy(k.contiguous(), "keys"), as_numpy(v.contiguous(), "values"))
        return output

    def _past_attention(self, layer: int, query: torch.Tensor, scaling: float,
                        past: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Every query (B, Hq, T, D) against its row's compressed past (past: the tokens each row
        holds), through kvsketch's decode: (output (B, T, Hq, D), lse (B, T, Hq)); a row with no
        past gives 0 and -inf."""
        b, hq, t, d = query.shape
        # kvsketch scales scores by 1/sqrt(head_dim); other scalings go into the queries.
        q = (query.float() * (scaling * math.sqrt(d))).transpose(1, 2)  # (B, T, Hq, D)
        past_out, past_lse = torch.zeros(b, t, hq, d), torch.full((b, t, hq), -math.inf)
        options = dict(threads=self.threads, integer_arithmetic=self.integer_arithmetic)
        if t == 1:  # a decode step: the batch in one call
            rows = [i for i in range(b) if past[i] > 0]
            o, l = self.kv.attention(layer, [self.sequences[i] for i in rows], q[rows, 0].contiguous().numpy(), **options)
            past_out[rows, 0], past_lse[rows, 0] = torch.from_numpy(o), torch.from_numpy(l)
        else:  # a chunk: each position of a row against the same past
            for i in range(b):
                if past[i] > 0:
                    o, l = self.kv.attention(layer, [self.sequences[i]] * t, q[i].contiguous().numpy(), **options)
                    past_out[i], past_lse[i] = torch.from_numpy(o), torch.from_numpy(l)
        return past_out, past_lse

"""kvsketch.hf: transformers models generating through the compressed cache (random weights from a
config; nothing is downloaded)."""
import os

import pytest

if os.environ.get("KVSKETCH_REQUIRE_TORCH") != "1":
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from transformers import (DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,  # noqa: E402
                          Qwen3Config, Qwen3ForCausalLM)

import kvsketch.hf as kh  # noqa: E402

SMALL = dict(vocab_size=256, hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2, max_position_embeddings=4096)
# A short window, so that most of a test's tokens live in the compressed body.
BODY = "|sinks=4|window=16|block=16"


def model_of(config_class=LlamaConfig, model_class=LlamaForCausalLM, seed=0, **overrides):
    torch.manual_seed(seed)
    model = model_class(config_class(**{**SMALL, **overrides})).eval()
    return model


def prompt(length, seed=1):
    # Token 0 is the padding of these tests (generate masks every pad token it sees in a prompt).
    return torch.randint(1, SMALL["vocab_size"], (1, length), generator=torch.Generator().manual_seed(seed))


def generate(model, ids, cache, attn, **kwargs):
    model.set_attn_implementation(attn)
    return model.generate(ids, cache=cache, do_sample=False, output_scores=True, return_dict_in_generate=True,
                          pad_token_id=0, **kwargs)


def teacher_forced_logits(model, tokens, cache, attn, prefill=48):
    """Logits of every position after a prefill chunk, feeding the given tokens one at a time."""
    model.set_attn_implementation(attn)
    with torch.no_grad():
        out = [model(tokens[:, :prefill], cache=cache, use_cache=True).logits[:, -1]]
        for i in range(prefill, tokens.shape[1]):
            out.append(model(tokens[:, i:i + 1], cache=cache, use_cache=True).logits[:, -1])
    return torch.cat(out)


class ReadBackCache(kh.Cache):
    """The reference: the same cache, its past attended exactly (float64) over the rows it holds."""

    def _past_attention(self, layer, query, scaling, past):
        b, hq, t, d = query.shape
        out, lse = torch.zeros(b, t, hq, d), torch.full((b, t, hq), -float("inf"))
        for i in range(b):
            keys, values = self.read(layer, i)
            if keys.shape[1] == 0:
                continue
            # Every query sees the whole past: the chunk's own keys come after it.
            o, l = kh.exact_attention(query[i:i + 1].double(), keys[None].double(), values[None].double(), None,
                                      scaling) if t == 1 else _each_position(query[i:i + 1], keys, values, scaling)
            out[i], lse[i] = o[0].transpose(0, 1).float(), l[0].transpose(0, 1).float()
        return out, lse


def _each_position(query, keys, values, scaling):
    outs, lses = [], []
    for j in range(query.shape[2]):
        o, l = kh.exact_attention(query[:, :, j:j + 1].double(), keys[None].double(), values[None].double(), None,
                                  scaling)
        outs.append(o)
        lses.append(l)
    return torch.cat(outs, 2), torch.cat(lses, 2)


def test_fp16_policy_generates_the_tokens_of_dynamic_cache():
    # (Random weights: a seed whose greedy choices all win by 0.17 or more, far beyond fp16's effect.)
    model, ids = model_of(seed=2), prompt(40, seed=3)
    reference = generate(model, ids, DynamicCache(config=model.config), "eager", max_new_tokens=40)
    cache = kh.Cache(model.config, policy="fp16")
    ours = generate(model, ids, cache, kh.ATTENTION, max_new_tokens=40)
    assert torch.equal(ours.sequences, reference.sequences)
    # fp16 keys and values are within 2^-11 of the float32 ones: the logits move by rounding only.
    worst = max((a - b).abs().max().item() for a, b in zip(ours.scores, reference.scores))
    assert worst < 2e-3, worst
    # Every byte counted: every token but the last generated one is held, as fp16 keys and values.
    tokens = ours.sequences.shape[1] - 1
    assert cache.bytes() == tokens * 2 * 2 * 2 * 64 * 2  # layers * kv_heads * (k, v) * head_dim * 2 bytes
    assert cache.kv.tokens(cache.sequences[0], 1) == tokens


def test_a_prefilled_dynamic_cache_continues_in_kvsketch():
    model, ids = model_of(seed=13), prompt(50, seed=14)
    model.set_attn_implementation("eager")
    dynamic = DynamicCache(config=model.config)
    with torch.no_grad():
        model(ids[:, :-1], cache=dynamic, use_cache=True)
    cache = kh.Cache.from_cache(dynamic, model.config, policy="fp16")
    assert cache.get_seq_length() == 49 and cache.kv.tokens(cache.sequences[0], 1) == 49
    ours = generate(model, ids, cache, kh.ATTENTION, max_new_tokens=16)
    reference = generate(model, ids, DynamicCache(config=model.config), "eager", max_new_tokens=16)
    assert torch.equal(ours.sequences, reference.sequences)
    assert max((a - b).abs().max().item() for a, b in zip(ours.scores, reference.scores)) < 2e-3


@pytest.mark.parametrize("family", [
    (Qwen2Config, Qwen2ForCausalLM, {}),  # q/k/v biases
    (Qwen3Config, Qwen3ForCausalLM, dict(head_dim=32, attention_bias=True)),  # per-head q/k norms, head_dim 32
], ids=["qwen2", "qwen3"])
def test_qwen_families_generate_the_tokens_of_dynamic_cache(family):
    config_class, model_class, overrides = family
    model, ids = model_of(config_class, model_class, seed=3, **overrides), prompt(33, seed=4)
    reference = generate(model, ids, DynamicCache(config=model.config), "sdpa", max_new_tokens=24)
    ours = generate(model, ids, kh.Cache(model.config, policy="fp16"), kh.ATTENTION, max_new_tokens=24)
    assert torch.equal(ours.sequences, reference.sequences)


@pytest.mark.parametrize("integer_arithmetic,bound", [(False, 1e-4), (True, 3e-2)])
def test_attention_from_codes_is_attention_over_the_rows_the_cache_holds(integer_arithmetic, bound):
    """What kvsketch.hf adds to the model's error is the codec's reconstruction error and nothing else:
    its logits equal those of exact attention over the cache's own rows (read back, float64), to
    float rounding with float arithmetic; with the integer kernels, queries are rounded to integers
    too, which moves the logits by 3.0e-3 on this model (bound 3e-2)."""
    model, tokens = model_of(), prompt(80, seed=2)
    policy = "tq_mse:b=3" + BODY
    ours = teacher_forced_logits(model, tokens, kh.Cache(model.config, policy=policy,
                                                         integer_arithmetic=integer_arithmetic), kh.ATTENTION)
    reference = teacher_forced_logits(model, tokens, ReadBackCache(model.config, policy=policy), kh.ATTENTION)
    worst = (ours - reference).abs().max().item()
    assert worst < bound, worst
    # The compression is there: against exact attention the logits move far more than that.
    exact = teacher_forced_logits(model, tokens, DynamicCache(config=model.config), "eager")
    assert (ours - exact).abs().max().item() > 20 * (bound if not integer_arithmetic else 1e-3)


def test_more_bits_keep_the_logits_closer():
    model, tokens = model_of(), prompt(96, seed=5)
    exact = F.log_softmax(teacher_forced_logits(model, tokens, DynamicCache(config=model.config), "eager"), -1)
    kl = {}
    for bits in (1, 2, 4):
        logits = teacher_forced_logits(model, tokens, kh.Cache(model.config, policy=f"tq_mse:b={bits}" + BODY),
                                       kh.ATTENTION)
        kl[bits] = F.kl_div(F.log_softmax(logits, -1), exact, log_target=True, reduction="batchmean").item()
    assert kl[1] > kl[2] > kl[4], kl
    assert kl[4] < 0.01, kl


def test_left_padded_batch_gives_each_prompt_its_own_tokens():
    model = model_of(seed=6)
    short, long = prompt(25, seed=7), prompt(41, seed=8)
    ids = torch.cat([torch.cat([torch.zeros(1, 16, dtype=torch.long), short], 1), long])
    mask = torch.cat([torch.cat([torch.zeros(1, 16, dtype=torch.long), torch.ones(1, 25, dtype=torch.long)], 1),
                      torch.ones(1, 41, dtype=torch.long)])
    cache = kh.Cache(model.config, policy="fp16")
    batch = generate(model, ids, cache, kh.ATTENTION, attention_mask=mask, max_new_tokens=20)
    # Padding is never appended: the short row holds its own tokens only.
    assert [cache.kv.tokens(s, 0) for s in cache.sequences] == [25 + 19, 41 + 19]
    for row, alone in ((0, short), (1, long)):
        single = generate(model, alone, DynamicCache(config=model.config), "eager", max_new_tokens=20)
        assert torch.equal(batch.sequences[row, -20:], single.sequences[0, -20:])


def test_beam_search_forks_and_selects_rows():
    model, ids = model_of(seed=9), prompt(30, seed=10)
    reference = generate(model, ids, DynamicCache(config=model.config), "eager", max_new_tokens=12, num_beams=3,
                         num_return_sequences=3)
    cache = kh.Cache(model.config, policy="fp16")
    ours = generate(model, ids, cache, kh.ATTENTION, max_new_tokens=12, num_beams=3, num_return_sequences=3)
    assert torch.equal(ours.sequences, reference.sequences)


def test_crop_rolls_back_as_if_the_tokens_never_came():
    model, tokens = model_of(seed=11), prompt(70, seed=12)
    policy = "tq_mse:b=3" + BODY + "|rollback=8"
    straight = teacher_forced_logits(model, tokens, kh.Cache(model.config, policy=policy), kh.ATTENTION, prefill=60)
    cache = kh.Cache(model.config, policy=policy)
    model.set_attn_implementation(kh.ATTENTION)
    with torch.no_grad():
        model(tokens[:, :66], cache=cache, use_cache=True)
        cache.crop(-6)  # speculative decoding's rollback of 6 rejected tokens
        assert cache.get_seq_length() == 60
    again = teacher_forced_logits(model, tokens[:, 60:], cache, kh.ATTENTION, prefill=1)
    # Positions 60..69 as if tokens 60..65 had never been appended (the rows of the first 60 come
    # from a chunk of 66 here and of 60 there: the same up to float rounding).
    assert again.shape == straight[1:].shape
    assert (again - straight[1:]).abs().max().item() < 1e-4
    with pytest.raises(Exception, match="rollback|truncate"):
        cache.crop(-40)


def test_a_model_not_attending_through_kvsketch_is_refused():
    model, ids = model_of(), prompt(10)
    model.set_attn_implementation("sdpa")
    with pytest.raises(RuntimeError, match="attn_implementation='kvsketch'"):
        with torch.no_grad():
            model(ids, cache=kh.Cache(model.config, policy="fp16"), use_cache=True)


def test_a_mask_that_disagrees_with_the_cache_is_refused():
    # Padding inside the past (not left padding) would need the cache to forget a held token.
    model, ids = model_of(), prompt(20)
    cache = kh.Cache(model.config, policy="fp16")
    model.set_attn_implementation(kh.ATTENTION)
    with torch.no_grad():
        model(ids, cache=cache, use_cache=True)
        mask = torch.ones(1, 21, dtype=torch.long)
        mask[0, 7] = 0
        with pytest.raises(ValueError, match="left padding"):
            model(prompt(1, seed=3), attention_mask=mask, cache=cache, use_cache=True)


def test_sliding_window_models_are_refused():
    config = Qwen2Config(**SMALL, use_sliding_window=True, sliding_window=16, max_window_layers=0)
    with pytest.raises(ValueError, match="sliding_attention"):
        kh.Cache(config, policy="fp16")


def test_the_example_runs():
    import re
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "python", "hf_generate.py")
    done = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    found = re.search(r"holds (\d+) bytes, ([\d.]+)x fewer than fp16; (\d+)% of the generated tokens", done.stdout)
    assert found, done.stdout
    assert float(found.group(2)) > 2.5 and int(found.group(3)) >= 25

"""Tests of the training data and losses that form the reference models' induction circuit
(tasks.repeated_tokens, attention_supervision, train.batch), run by CTest in the PyTorch venv."""
import math
import os
import random
import sys

import pytest
import torch

sys.path.insert(0, os.path.dirname(__file__))
import attention_supervision  # noqa: E402
import tasks  # noqa: E402
import tokenizer_build  # noqa: E402

MODELS = os.path.join(os.path.dirname(__file__), "..", "models")


@pytest.mark.parametrize("length", [32, 64, 256, 2048])
def test_repeated_tokens_point_each_copy_at_its_source(length):
    rng = random.Random(length)
    copies = 0
    for _ in range(20):
        ids, sources = tasks.repeated_tokens(rng, length, 3, 4096)
        assert len(ids) == len(sources) == length
        assert all(3 <= t < 4096 for t in ids)
        for p, s in enumerate(sources):
            if s is None:
                continue
            copies += 1
            # The copied token and the one before it repeat the source and the one before it, from
            # at most half a row plus the longest span away.
            assert s < p and ids[s] == ids[p] and ids[s - 1] == ids[p - 1]
            assert p - s <= length // 2 + max(8, length // 8)
    assert copies > length // 2  # a copied token in every 40 or fewer, over the 20 rows


def test_repeated_tokens_are_seeded():
    assert tasks.repeated_tokens(random.Random(7), 64, 3, 100) == tasks.repeated_tokens(random.Random(7), 64, 3, 100)


def circuit_attention(attend, length, heads=2, sharpness=1.0):
    """Attention probabilities in transformers' layout for two layers: head 0 of layer 0 on the
    previous token, head 0 of layer 1 on `attend`, mixed with uniform causal attention by
    1 - sharpness."""
    causal = torch.tril(torch.ones(length, length))
    uniform = causal / causal.sum(-1, keepdim=True)
    previous = torch.zeros(length, length)
    previous[0, 0] = 1
    previous[torch.arange(1, length), torch.arange(length - 1)] = 1
    layers = []
    for first in (previous.expand(attend.shape[0], length, length), None):
        if first is None:
            first = uniform.repeat(attend.shape[0], 1, 1)
            for b, t in zip(*torch.nonzero(attend >= 0, as_tuple=True)):
                first[b, t] = 0
                first[b, t, attend[b, t]] = 1
        head = sharpness * first + (1 - sharpness) * uniform
        layers.append(torch.stack([head] + [uniform.expand_as(head)] * (heads - 1), dim=1))
    return layers


def test_attention_loss_is_zero_on_the_circuit_and_large_elsewhere():
    rng = random.Random(1)
    rows = [tasks.repeated_tokens(rng, 64, 3, 4096)[1] for _ in range(4)]
    attend = torch.full((4, 64), -1, dtype=torch.long)
    for b, sources in enumerate(rows):
        for p, s in enumerate(sources):
            if s is not None:
                attend[b, p - 1] = s
    exact = attention_supervision.attention_loss(circuit_attention(attend, 64), attend)
    assert float(exact) < 1e-4
    spread = attention_supervision.attention_loss(circuit_attention(attend, 64, sharpness=0.0), attend)
    # Uniform attention over about 32 earlier tokens on average: two cross-entropies of a few nats.
    assert float(spread) > 2 * math.log(8)
    half = attention_supervision.attention_loss(circuit_attention(attend, 64, sharpness=0.5), attend)
    assert float(exact) < float(half) < float(spread)


def test_attention_loss_ignores_masked_positions():
    attend = torch.full((1, 16), -1, dtype=torch.long)
    layers = circuit_attention(attend, 16)
    layers[0][0, 0, 12:] = 0  # padding: no previous-token attention there
    layers[0][0, 0, 12:, 0] = 1
    mask = torch.ones(1, 16, dtype=torch.long)
    mask[0, 12:] = 0
    assert float(attention_supervision.attention_loss(layers, attend, mask)) < 1e-4
    assert float(attention_supervision.attention_loss(layers, attend)) > 1.0


def test_token_rows_in_a_batch_have_no_bos_and_loss_only_on_copies():
    tokenizers = pytest.importorskip("tokenizers")
    import train
    tokenizer = tokenizers.Tokenizer.from_file(os.path.join(MODELS, "llama-reference", "tokenizer.json"))
    ids, mask, weight, attend = train.batch(random.Random(3), tokenizer, "", [], 64, 8, 3.0, {"tokens": 1.0})
    assert ids.shape == (8, 64) and bool(mask.all())
    # No BOS or other special token anywhere (they take the first ids).
    assert not bool(ids.lt(len(tokenizer_build.special_tokens(tokenizer))).any())
    b, t = torch.nonzero(attend >= 0, as_tuple=True)
    assert len(b) > 0
    assert bool((ids[b, attend[b, t]] == ids[b, t + 1]).all())
    # Weights: the answer weight exactly on the tokens an induction head predicts, 0 elsewhere.
    expected = torch.zeros_like(weight)
    expected[b, t + 1] = train.ANSWER_WEIGHT
    assert torch.equal(weight, expected)


def test_hard_mqar_keys_end_alike_and_values_share_digits():
    vocabulary = [w + end for w in ("pro", "con", "re", "de", "ex", "sub", "inter", "trans")
                  for end in ("claim", "tain", "ject", "fer", "cede")] + ["unique"]
    rng = random.Random(5)
    text, spans = tasks.mqar_hard(rng, vocabulary, pairs=24)
    pairs_part, recall = text.split("\nRecall:")
    pairs = [p.rsplit(" ", 1) for p in pairs_part[len("Remember these pairs: "):-1].split(", ")]
    keys, values = [k for k, _ in pairs], [v for _, v in pairs]
    assert len(set(keys)) == 24 and "unique" not in keys  # only words with a same-ending partner
    endings = [k[-3:] for k in keys]
    assert all(endings.count(e) >= 2 for e in endings)
    assert all(len(v) == 3 and v.isdigit() and v[0] != "0" for v in values)
    assert all(sum(u[0] == v[0] for u in values) >= 2 for v in values)  # no value's first digit is alone
    # Every pair is asked once, and each answer span holds the value of the key just before it.
    answers = {}
    for a, b in spans:
        key = text[:a - 1].rsplit(" ", 1)[1]
        answers[key] = text[a:b]
    assert answers == dict(zip(keys, values))
    assert recall.count(",") == 23


# Haystack text without digits: every digit of a prompt built on it is the task's own.
DIGITLESS_HAYSTACK = "A line of haystack text without digits.\n" * 400


def test_hard_passkeys_repeat_two_or_three_digits():
    rng = random.Random(3)
    kinds = set()
    for depth in (0.0, 0.5, 1.0):
        for _ in range(40):
            text, [(a, b)] = tasks.passkey_hard(rng, DIGITLESS_HAYSTACK, 2000, depth=depth)
            key = text[a:b]
            assert len(key) == 5 and key.isdigit() and key[0] != "0"
            assert len(set(key)) in (2, 3)
            kinds.add(len(set(key)))
            # The needle states this key twice, the question asks for it at the end.
            assert text.count(f"The pass key is {key}. Remember it. {key} is the pass key.") == 1
            assert text.endswith(f"What is the pass key? The pass key is {key}.")
            needle = text.index("\nThe pass key")
            assert abs(needle / len(text) - depth) < 0.1
    assert kinds == {2, 3}


def test_digit_codes_are_stated_then_asked_again():
    rng = random.Random(4)
    lengths = []
    for _ in range(50):
        text, [(a, b)] = tasks.copy_digits(rng, DIGITLESS_HAYSTACK, 1500)
        code = text[a:b]
        assert code.isdigit() and 10 <= len(code) <= 120
        assert text.count(code) == 2 and f"The code is {code}.\n" in text
        assert text.endswith(f"\nThe code was {code}.") and abs(len(text) - 1500) < 60
        lengths.append(len(code))
    assert min(lengths) < 40 and max(lengths) > 90


def test_sentencepiece_alphabet_is_the_same_on_every_run():
    pytest.importorskip("tokenizers")
    # 400 characters seen once each, after common ones: which of them the 160-character alphabet
    # keeps is decided by the tie-break, by code point.
    rare = "".join(chr(0x4E00 + i) for i in range(400))
    texts = ["the quick brown fox jumps over the lazy dog 0123456789 " * 20, rare]
    vocabularies = []
    for _ in range(3):
        tokenizer, _ = tokenizer_build.train("sentencepiece", texts, 600)
        vocabularies.append(tokenizer.get_vocab())
    assert vocabularies[0] == vocabularies[1] == vocabularies[2]
    common = set("▁thequickbrownfxjmpsvlazydg0123456789")
    kept = [c for c in rare if c in vocabularies[0]]
    assert kept == list(rare[:tokenizer_build.ALPHABET_SIZE - len(common)])

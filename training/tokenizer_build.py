"""Trains the reference models' tokenizers with Hugging Face `tokenizers`, in the two layouts the
Llama-family checkpoints use, so that kvsketch's tokenizer is exercised on both:

  sentencepiece  Llama 2 / TinyLlama / Mistral: spaces become "▁" (prepended to the text), BPE over
                 characters with byte fallback (<0x00>..<0xFF> at ids 3..258), digits one per token,
                 "<s>" prepended by the post-processor
  byte_level     Qwen2: NFC, Qwen2's pre-tokenizer regex (digits one per token), BPE over the
                 GPT-2 byte alphabet, no BOS
"""
import collections
import json

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_SENTENCEPIECE = ["<unk>", "<s>", "</s>"]
SPECIAL_BYTE_LEVEL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _sentencepiece_normalizer():
    return normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])


ALPHABET_SIZE = 160


def character_alphabet(texts, size):
    """The `size` most frequent characters of the texts after the SentencePiece normalizer, ties by
    code point. `tokenizers`' own `limit_alphabet` ranks with an unstable sort over a hash map, so its
    choice among characters of equal count changes from run to run (and with it the token ids)."""
    counts = collections.Counter()
    for text in texts:
        counts.update("▁" + text.replace(" ", "▁"))
    return [c for c, _ in sorted(counts.items(), key=lambda kv: (-kv[1], ord(kv[0])))[:size]]


def train_sentencepiece(texts, vocab_size):
    # Words are split at "▁" and digits apart for training only: no learned merge then crosses a
    # word start or joins digits, so the final tokenizer needs no pre-tokenizer, as Llama 2's.
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
    learner = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    learner.normalizer = _sentencepiece_normalizer()
    learner.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split("▁", behavior="merged_with_next"), pre_tokenizers.Digits(individual_digits=True)])
    # The alphabet is given, each character counted as always kept, so the limit keeps exactly it.
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - len(byte_tokens), special_tokens=SPECIAL_SENTENCEPIECE,
                                  initial_alphabet=character_alphabet(texts, ALPHABET_SIZE),
                                  limit_alphabet=ALPHABET_SIZE, show_progress=False)
    learner.train_from_iterator(texts, trainer)
    learned = json.loads(learner.to_str())
    trained_vocab = sorted(learned["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {token: i for i, token in enumerate(SPECIAL_SENTENCEPIECE + byte_tokens)}
    for token, _ in trained_vocab:
        if token not in vocab:
            vocab[token] = len(vocab)
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ")) if isinstance(m, str) else tuple(m)
                                                          for m in learned["model"]["merges"]],
                                     unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tokenizer.normalizer = _sentencepiece_normalizer()
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                           decoders.Strip(" ", 1, 0)])
    tokenizer.add_special_tokens(SPECIAL_SENTENCEPIECE)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                             special_tokens=[("<s>", 1)])
    return tokenizer, facts("sentencepiece")


def train_byte_level(texts, vocab_size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
         pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)])
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_BYTE_LEVEL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer, facts("byte_level")


def special_tokens(tokenizer):
    """The special tokens a trained tokenizer holds, which take its first ids."""
    specials = SPECIAL_SENTENCEPIECE if tokenizer.token_to_id(SPECIAL_SENTENCEPIECE[0]) is not None else SPECIAL_BYTE_LEVEL
    assert [tokenizer.token_to_id(t) for t in specials] == list(range(len(specials))), specials
    return specials


def facts(kind):
    """The special tokens of a tokenizer of `kind`, for tokenizer_config.json."""
    if kind == "sentencepiece":
        return {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "bos_token_id": 1, "eos_token_id": 2,
                "add_bos_token": True}
    return {"bos_token": None, "eos_token": "<|endoftext|>", "unk_token": None, "bos_token_id": None,
            "eos_token_id": 0, "add_bos_token": False}


def train(kind, texts, vocab_size):
    """(Tokenizer, special-token facts) of a tokenizer of `kind` trained on `texts`."""
    if kind == "sentencepiece":
        return train_sentencepiece(texts, vocab_size)
    if kind == "byte_level":
        return train_byte_level(texts, vocab_size)
    raise ValueError(f"unknown tokenizer kind {kind!r}")


def tokenizer_config(facts, model_max_length):
    """tokenizer_config.json as transformers' PreTrainedTokenizerFast reads it."""
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": model_max_length,
              "clean_up_tokenization_spaces": False}
    for key in ("bos_token", "eos_token", "unk_token"):
        if facts[key] is not None:
            config[key] = facts[key]
    return config

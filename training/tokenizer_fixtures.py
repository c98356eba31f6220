"""Golden fixtures for kvsketch's tokenizer: tokenizers of every layout kvsketch reads, trained with
Hugging Face `tokenizers` on the reference corpus, and the ids that library gives for about 2 MB of
varied text (English prose and code, many languages, accents in composed and decomposed form, CJK,
emoji with joiners and modifiers, whitespace runs, digits, special-token strings inside text).

    .venv-train/bin/python training/tokenizer_fixtures.py tests/data/tokenizers

Writes text.jsonl.gz (one JSON string per chunk), NAME.json (a tokenizer.json) and NAME.golden.json:
for every chunk the id count and the CRC-32 of the ids (int32 little-endian) and of the decoded
text, and the ids of the first chunks in full (for reading a failure).
"""
import gettext
import glob
import gzip
import json
import os
import random
import struct
import sys
import unicodedata
import zlib

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

import corpus
import tokenizer_build

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LANGUAGES = ["de", "fr", "es", "pt", "it", "pl", "ru", "uk", "el", "tr", "vi", "ja", "zh_CN", "zh_TW", "ko", "ar",
             "he", "hi", "th", "ka", "hy", "bn", "ta", "fa"]


def translations(rng, limit_chars):
    """Messages translated into many languages, from the gettext catalogues Debian installs."""
    out = []
    for language in LANGUAGES:
        texts = []
        for path in sorted(glob.glob(f"/usr/share/locale/{language}/LC_MESSAGES/*.mo"))[:12]:
            try:
                with open(path, "rb") as f:
                    catalog = gettext.GNUTranslations(f)
            except Exception:
                continue
            texts += [v for k, v in sorted(catalog._catalog.items(), key=lambda kv: str(kv[0])) if isinstance(v, str) and v]
        rng.shuffle(texts)
        out.append("\n".join(texts)[:limit_chars])
    return out


def stress(rng, count):
    """Short texts built to hit the corners of normalization, pre-tokenization and byte fallback."""
    pieces = ["café", "cafe\u0301", "Å", "A\u030a", "ﬁ", "①②", "２０２６年", "\u00a0", "\u3000", "\u2028", "\t\t",
              "   ", "\r\n", "\n\n\n", "😀", "👍🏽", "👩\u200d💻", "🇫🇷", "東京タワー", "한국어", "Ελληνικά", "русский",
              "עברית", "العربية", "हिन्दी", "ไทย", "123456789", "3.14159", "x**2", "'s", "'LL", "don't", "I'M",
              "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "[ADDED]", " [ADDED] ", "▁", "\u200b", "ǅ", "ẞ",
              "\U0001d400", "\ufeff", "def f(x):\n    return x", "{\"a\": [1, 2]}", "C:\\path\\file.txt"]
    out = []
    for _ in range(count):
        parts = rng.choices(pieces, k=rng.randint(3, 40))
        joiners = [" ", "", "\n", "  ", "\t"]
        text = "".join(p + rng.choice(joiners) for p in parts)
        if rng.random() < 0.3:
            text += "".join(chr(rng.choice([rng.randint(0x20, 0x7e), rng.randint(0xa0, 0x2fff),
                                             rng.randint(0x4e00, 0x9fff), rng.randint(0x1f300, 0x1faff)]))
                            for _ in range(rng.randint(1, 30)))
        out.append(text)
    return out


def chunks(rng):
    english = [t for _, t in corpus.documents("validation")]
    texts = []
    for doc in english:
        lines = doc.split("\n")
        for i in range(0, len(lines), 25):
            texts.append("\n".join(lines[i:i + 25]))
    rng.shuffle(texts)
    texts = texts[:1500]
    for text in translations(rng, 24000):
        texts += [text[i:i + 1500] for i in range(0, len(text), 1500)]
    texts += stress(rng, 400)
    texts += [unicodedata.normalize("NFD", t) for t in rng.sample(texts, 60)]
    rng.shuffle(texts)
    return [t for t in texts if t]


def build(kind, training_texts):
    if kind == "llama2_sentencepiece":
        tokenizer, _ = tokenizer_build.train_sentencepiece(training_texts, 1200)
    elif kind == "qwen2_byte_level":
        tokenizer, _ = tokenizer_build.train_byte_level(training_texts, 1000)
    elif kind in ("gpt2_byte_level", "llama3_byte_level"):
        tokenizer = Tokenizer(models.BPE())
        if kind == "gpt2_byte_level":
            tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        else:
            tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
        tokenizer.decoder = decoders.ByteLevel()
        specials = ["<|begin_of_text|>", "<|end_of_text|>"] if kind == "llama3_byte_level" else ["<|endoftext|>"]
        trainer = trainers.BpeTrainer(vocab_size=1000, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator(training_texts, trainer)
        if kind == "llama3_byte_level":
            tokenizer.post_processor = processors.Sequence([
                processors.ByteLevel(trim_offsets=False),
                processors.TemplateProcessing(single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", 0)])])
    elif kind == "mistral_metaspace":
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
        trainer_tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
        trainer_tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
        trainer = trainers.BpeTrainer(vocab_size=900, special_tokens=["<unk>", "<s>", "</s>"], limit_alphabet=120,
                                      show_progress=False)
        trainer_tokenizer.train_from_iterator(training_texts, trainer)
        learned = json.loads(trainer_tokenizer.to_str())
        spec = json.loads(tokenizer.to_str())
        vocab = dict(learned["model"]["vocab"])
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        spec["model"]["vocab"] = vocab
        spec["model"]["merges"] = learned["model"]["merges"]
        spec["decoder"] = json.loads(decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="first"),
                                                        decoders.ByteFallback(), decoders.Fuse()]).__getstate__())
        tokenizer = Tokenizer.from_str(json.dumps(spec))
        tokenizer.add_special_tokens(["<unk>", "<s>", "</s>"])
        tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    else:
        raise ValueError(kind)
    if kind == "llama3_byte_level":  # as Llama 3's own file: a piece in the vocabulary is one token
        spec = json.loads(tokenizer.to_str())
        spec["model"]["ignore_merges"] = True
        tokenizer = Tokenizer.from_str(json.dumps(spec))
    # An added token of each flavour: special and stripped, normalized and matched as a word.
    tokenizer.add_tokens([AddedToken("[ADDED]", single_word=True, normalized=True)])
    tokenizer.add_special_tokens([AddedToken("<|im_start|>", lstrip=True, rstrip=False)])
    return tokenizer


def crc(data):
    return zlib.crc32(data) & 0xFFFFFFFF


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = random.Random(20261128)
    texts = chunks(rng)
    with gzip.open(os.path.join(out, "text.jsonl.gz"), "wt", encoding="utf-8", compresslevel=9) as f:
        for t in texts:
            f.write(json.dumps(t, ensure_ascii=False) + "\n")
    training_texts = [t[:100000] for _, t in corpus.documents("train")][::4]
    for kind in ["llama2_sentencepiece", "qwen2_byte_level", "gpt2_byte_level", "llama3_byte_level",
                 "mistral_metaspace"]:
        tokenizer = build(kind, training_texts)
        tokenizer.save(os.path.join(out, kind + ".json"))
        tokenizer = Tokenizer.from_file(os.path.join(out, kind + ".json"))
        golden = {"chunks": [], "first_ids": []}
        for i, text in enumerate(texts):
            ids = tokenizer.encode(text).ids
            decoded = tokenizer.decode(ids, skip_special_tokens=True)
            golden["chunks"].append([len(ids), crc(struct.pack(f"<{len(ids)}i", *ids)), crc(decoded.encode("utf-8"))])
            if i < 20:
                golden["first_ids"].append(ids)
        with open(os.path.join(out, kind + ".golden.json"), "w") as f:
            json.dump(golden, f, separators=(",", ":"))
        print(kind, sum(c[0] for c in golden["chunks"]), "ids", file=sys.stderr)
    print(len(texts), "chunks,", sum(len(t.encode()) for t in texts), "bytes", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1])

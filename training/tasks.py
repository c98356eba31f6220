"""Documents the reference models are trained on: natural text, and synthetic long-context retrieval
in natural-text haystacks. Each generator returns (text, answer spans): the character ranges whose
tokens are the answers a model must retrieve (weighted more in the loss, scored in evaluation).

The prompts are the ones `kvsketch retrieval` builds (src/model/retrieval_tasks.cpp); change both
together.
"""

PASSKEY_INTRO = ("There is important information hidden inside a lot of irrelevant text. "
                 "Find it and memorize it. I will quiz you about it.\n")
PASSKEY_NEEDLE = "\nThe pass key is {key}. Remember it. {key} is the pass key.\n"
PASSKEY_QUESTION = "\nWhat is the pass key? The pass key is {key}."
NEEDLE = "\nThe special magic number for {word} is {value}.\n"
NEEDLE_QUESTION = "\nWhat is the special magic number for {word}? The special magic number for {word} is {value}."


def haystack(rng, corpus_text, chars):
    """`chars` characters of corpus text starting at a random line."""
    if chars <= 0:
        return ""
    start = rng.randrange(0, max(1, len(corpus_text) - chars))
    line = corpus_text.find("\n", start)
    start = line + 1 if 0 <= line < start + 200 else start
    return corpus_text[start:start + chars]


def _answer(text, prefix, answer):
    """Appends prefix and answer to text; returns the new text and the answer's character span."""
    text += prefix
    return text + answer, (len(text), len(text) + len(answer))


def passkey(rng, corpus_text, chars, depth=None, key=None):
    key = key or str(rng.randrange(10000, 100000))
    depth = rng.random() if depth is None else depth
    body = chars - len(PASSKEY_INTRO) - 2 * len(PASSKEY_NEEDLE) - len(PASSKEY_QUESTION)
    before = int(max(0, body) * depth)
    text = PASSKEY_INTRO + haystack(rng, corpus_text, before)
    text += PASSKEY_NEEDLE.format(key=key)
    text += haystack(rng, corpus_text, max(0, body) - before)
    question, _, _ = PASSKEY_QUESTION.partition("{key}")
    text, span = _answer(text, question, key)
    return text + ".", [span]


def passkey_hard(rng, corpus_text, chars, depth=None):
    """A passkey of five digits drawn from two or three, each used at least once (as 77377 or 92922).
    A model that copies the digit that followed the previous copy of the last digit goes astray in
    them; it must match the digits before too, as a uniform key needs wherever a digit repeats."""
    digits = rng.sample("0123456789", rng.randint(2, 3))
    while True:
        key = "".join(rng.choice(digits) for _ in range(5))
        if key[0] != "0" and set(key) == set(digits):
            return passkey(rng, corpus_text, chars, depth, key)


def needles(rng, corpus_text, chars, vocabulary, count=None):
    """Several magic numbers keyed by words, one asked for: the others are distractors."""
    count = count or rng.randint(2, 6)
    keys = rng.sample(vocabulary, count)
    values = [str(rng.randrange(1000000, 10000000)) for _ in keys]
    body = chars - count * 60 - 120
    cuts = sorted(rng.randrange(0, max(1, body)) for _ in keys)
    text, last = "", 0
    for word, value, cut in zip(keys, values, cuts):
        text += haystack(rng, corpus_text, cut - last) + NEEDLE.format(word=word, value=value)
        last = cut
    text += haystack(rng, corpus_text, max(0, body) - last)
    asked = rng.randrange(count)
    question, _, _ = NEEDLE_QUESTION.format(word=keys[asked], value="\0").partition("\0")
    text, span = _answer(text, question, values[asked])
    return text + ".", [span]


def mqar(rng, vocabulary, pairs=None, queries=None):
    """Multi-query associative recall (Zoology): key-value pairs, then keys asked again in random
    order, each followed by its value."""
    pairs = pairs or rng.randint(8, 64)
    queries = min(queries or pairs, pairs)
    keys = rng.sample(vocabulary, pairs)
    values = [str(rng.randrange(100, 1000)) for _ in keys]
    return _recall(rng, keys, values, queries)


def _recall(rng, keys, values, queries):
    """MQAR's text: the pairs, then `queries` of the keys in random order, each with its value."""
    text = "Remember these pairs: " + ", ".join(f"{k} {v}" for k, v in zip(keys, values)) + ".\nRecall:"
    spans = []
    for i in rng.sample(range(len(keys)), queries):
        text, span = _answer(text, f" {keys[i]} ", values[i])
        spans.append(span)
        text += ","
    return text[:-1] + ".", spans


def _endings(vocabulary):
    """The vocabulary's words grouped by their last three letters (groups of two or more words), cached
    per vocabulary: words that end alike mostly end in the same token."""
    if _endings.cache.get("vocabulary") is not vocabulary:
        groups = {}
        for word in vocabulary:
            groups.setdefault(word[-3:], []).append(word)
        _endings.cache = {"vocabulary": vocabulary, "groups": [g for g in groups.values() if len(g) >= 2]}
    return _endings.cache["groups"]


_endings.cache = {}


def mqar_hard(rng, vocabulary, pairs=None):
    """MQAR whose keys come in groups ending alike and whose values come in groups sharing their first
    digits. A model that matches only the key's last token (or a value's last digit) confuses them;
    it must match the whole key, as `kvsketch retrieval`'s MQAR needs wherever two of its 32 keys end
    in the same token."""
    pairs = pairs or rng.randint(8, 64)
    groups = _endings(vocabulary)
    keys, seen = [], set()
    while len(keys) < pairs:
        group = rng.choice(groups)
        for word in rng.sample(group, min(len(group), rng.randint(2, 4), pairs - len(keys))):
            if word not in seen:
                seen.add(word)
                keys.append(word)
    rng.shuffle(keys)
    values = []
    while len(values) < pairs:
        lead = str(rng.randrange(10, 100))[:rng.randint(1, 2)]
        for _ in range(min(rng.randint(2, 3), pairs - len(values))):
            values.append((lead + str(rng.randrange(0, 100)).zfill(2))[:3])
    rng.shuffle(values)
    return _recall(rng, keys, values, pairs)


def repeated_span(rng, corpus_text, chars):
    """A passage, other text, then the passage again: its second copy is the answer."""
    length = rng.randint(100, 400)
    passage = haystack(rng, corpus_text, length)
    text = passage + "\n" + haystack(rng, corpus_text, max(0, chars - 2 * length)) + "\n"
    start = len(text)
    return text + passage, [(start, start + len(passage))]


def copy_words(rng, vocabulary, chars, corpus_text=None):
    """A random sequence of words, then the same sequence again: the second copy can only be
    predicted by looking back (the induction pattern retrieval rests on). Its length and the text
    before it vary, so that no fixed offset predicts the copy."""
    count = rng.randint(4, max(4, min(200, chars // 20)))
    words = rng.choices(vocabulary, k=count)
    lead = haystack(rng, corpus_text, rng.randrange(max(1, chars - count * 16))) + "\n" if corpus_text else ""
    first = lead + "Words: " + " ".join(words) + ".\nAgain:"
    answer = " " + " ".join(words)
    return first + answer + ".", [(len(first), len(first) + len(answer))]


def copy_digits(rng, corpus_text, chars):
    """A code of 10 to 120 random digits in a haystack, stated again at the end: every digit of the
    second copy is an answer. With ten symbols, the digit that followed an earlier copy of the last
    one is right one time in ten; the copy must track its place, as passkeys with repeated digits
    need, with many answer tokens per document."""
    code = "".join(rng.choice("0123456789") for _ in range(rng.randint(10, 120)))
    body = max(0, chars - 2 * len(code) - 40)
    before = rng.randrange(body + 1)
    text = haystack(rng, corpus_text, before) + "\nThe code is " + code + ".\n"
    text += haystack(rng, corpus_text, body - before) + "\nThe code was "
    text, span = _answer(text, "", code)
    return text + ".", [span]


def repeated_tokens(rng, length, low, high, spans=None, max_gap=None, max_distance=None):
    """`length` random token ids in [low, high) in which spans repeat after random gaps, and per
    token the position it copies where copying predicts it (a repeat's tokens after its first),
    else None. Random tokens leave only a look-up by content to predict a repeat (an induction
    head, the mechanism every retrieval task rests on)."""
    spans = spans or (3, max(8, length // 8))
    max_gap = max(4, length // 8) if max_gap is None else max_gap
    # Copies far from their spans: with copies only a few tokens on, a head supervised to look up
    # by content did not learn to (attention_supervision), while at up to half the row it does.
    max_distance = length // 2 if max_distance is None else max_distance
    ids = [rng.randrange(low, high) for _ in range(length)]
    sources = [None] * length
    position = 0
    while True:
        # Random tokens before a span and between it and its copy: no fixed offset predicts a copy.
        start = position + rng.randint(0, max_gap)
        span = rng.randint(*spans)
        copy = start + span + rng.randint(0, max_distance)
        if copy + span > length:
            return ids, sources
        ids[copy:copy + span] = ids[start:start + span]
        sources[copy + 1:copy + span] = range(start + 1, start + span)
        position = copy + span


def document(rng, corpus_text, vocabulary, chars, mix):
    """One training document of about `chars` characters, its kind drawn from `mix` (kind → weight)."""
    kinds, weights = zip(*mix.items())
    kind = rng.choices(kinds, weights)[0]
    if kind == "text":
        return haystack(rng, corpus_text, chars), []
    if kind == "passkey":
        return passkey(rng, corpus_text, chars)
    if kind == "passkey_hard":
        return passkey_hard(rng, corpus_text, chars)
    if kind == "needles":
        return needles(rng, corpus_text, chars, vocabulary)
    if kind == "mqar":
        pairs = max(4, min(64, chars // 40))
        return mqar(rng, vocabulary, pairs=rng.randint(4, pairs))
    if kind == "mqar_hard":
        return mqar_hard(rng, vocabulary, pairs=rng.randint(8, max(8, min(64, chars // 40))))
    if kind == "digits":
        return copy_digits(rng, corpus_text, chars)
    if kind == "repeat":
        return repeated_span(rng, corpus_text, chars)
    if kind == "copy":
        return copy_words(rng, vocabulary, chars, corpus_text)
    raise ValueError(kind)

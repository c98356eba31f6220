"""Where a model's retrieval answers fail, in PyTorch (transformers) on a model folder, each answer
digit scored given the true ones before it.

    .venv-train/bin/python training/retrieval_errors.py --model models/llama-reference --task mqar
    .venv-train/bin/python training/retrieval_errors.py --model models/llama-reference --task passkey

MQAR: accuracy at a number of pairs split by whether the asked key's last token ends another key
too, and per digit of the value. A model that finds a key by its last token alone confuses keys
that end alike; one that copies a value's next digit from the previous digit alone confuses values
that share digits. The prompts are `kvsketch retrieval --task mqar`'s, with key words drawn as its
`words_of` draws them.

Passkey: accuracy per needle depth at about `--context` tokens, per digit, and each miss with what
the model read instead (a model that copies the digit that followed an earlier copy of the last
digit reads 78773 as 78777).
"""
import argparse
import collections
import random
import re

import tokenizers
import torch
import transformers

import tasks
import train


class Tally:
    """Right and total counts by name, printed in the order first seen."""

    def __init__(self):
        self.groups = collections.defaultdict(lambda: [0, 0])

    def count(self, name, correct):
        self.groups[name][0] += int(correct)
        self.groups[name][1] += 1

    def print(self):
        for name, (right, total) in self.groups.items():
            print(f"{name:36s} {100 * right / total:5.1f}%  ({right}/{total})")


def mqar_errors(model, tokenizer, text, rng, args, tally):
    words = sorted(set(re.findall(r"(?<![A-Za-z0-9_])[a-z]{3,9}(?![A-Za-z0-9_])", text)))
    for _ in range(args.prompts):
        prompt, spans = tasks.mqar(rng, words, pairs=args.pairs)
        asked = [prompt[:a - 1].rsplit(" ", 1)[1] for a, _ in spans]  # every key, once
        last_token = {k: tokenizer.encode(" " + k, add_special_tokens=False).ids[-1] for k in asked}
        endings = collections.Counter(last_token.values())
        for right, key in zip(train.answer_tokens_correct(model, tokenizer, prompt, spans), asked):
            shared = endings[last_token[key]] > 1
            tally.count("all", all(right))
            tally.count("key's last token ends another key" if shared else "key's last token its own", all(right))
            for i, r in enumerate(right):
                tally.count(f"digit {i + 1}", r)


def passkey_errors(model, tokenizer, text, rng, args, tally):
    sample = text[:200000]
    chars_per_token = len(sample) / len(tokenizer.encode(sample).ids)
    for depth in (0.0, 0.25, 0.5, 0.75, 1.0):
        for _ in range(args.prompts):
            # Haystack cuts tokenize unevenly: redraw until the prompt is within 3% of the context.
            while True:
                prompt, spans = tasks.passkey(rng, text, int(args.context * chars_per_token), depth=depth)
                tokens = len(tokenizer.encode(prompt).ids)
                if abs(tokens - args.context) <= 0.03 * args.context:
                    break
                chars_per_token *= args.context / tokens
            [right] = train.answer_tokens_correct(model, tokenizer, prompt, spans)
            tally.count("all", all(right))
            tally.count(f"depth {depth:g}", all(right))
            for i, r in enumerate(right):
                tally.count(f"digit {i + 1}", r)
            if not all(right):
                a, b = spans[0]
                read = read_answer(model, tokenizer, prompt[:a], b - a)
                print(f"depth {depth:g}: pass key {prompt[a:b]}, read {read}")


@torch.no_grad()
def read_answer(model, tokenizer, prefix, digits):
    """Greedy decoding of `digits` tokens after prefix: what the model answers."""
    ids = tokenizer.encode(prefix).ids
    for _ in range(digits):
        ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
    return tokenizer.decode(ids[-digits:])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--task", choices=("mqar", "passkey"), default="mqar")
    parser.add_argument("--text", default="data/validation-text.txt", help="key words (mqar) or haystacks (passkey)")
    parser.add_argument("--pairs", type=int, default=32, help="mqar: pairs per prompt")
    parser.add_argument("--context", type=int, default=2000, help="passkey: prompt tokens")
    parser.add_argument("--prompts", type=int, default=60, help="prompts (passkey: per depth)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).eval()
    tokenizer = tokenizers.Tokenizer.from_file(f"{args.model}/tokenizer.json")
    text = open(args.text, encoding="utf-8").read()
    tally = Tally()
    (mqar_errors if args.task == "mqar" else passkey_errors)(model, tokenizer, text, random.Random(args.seed), args,
                                                              tally)
    tally.print()


if __name__ == "__main__":
    main()

"""Where a model's MQAR answers fail, in PyTorch (transformers) on a model folder: accuracy at a
number of pairs split by whether the asked key's last token ends another key too, and per digit of
the value (each digit given the true ones before it).

    .venv-train/bin/python training/mqar_errors.py --model models/llama-reference

A model that finds a key by its last token alone confuses keys that end alike; one that copies a
value digit by digit from the previous digit confuses values that share digits. The prompts are
`kvsketch retrieval --task mqar`'s, with key words drawn as its `words_of` draws them.
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


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--text", default="data/validation-text.txt", help="the text key words are drawn from")
    parser.add_argument("--pairs", type=int, default=32)
    parser.add_argument("--prompts", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    model = transformers.AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).eval()
    tokenizer = tokenizers.Tokenizer.from_file(f"{args.model}/tokenizer.json")
    text = open(args.text, encoding="utf-8").read()
    words = sorted(set(re.findall(r"(?<![A-Za-z0-9_])[a-z]{3,9}(?![A-Za-z0-9_])", text)))
    rng = random.Random(args.seed)
    groups = collections.defaultdict(lambda: [0, 0])

    def count(name, correct):
        groups[name][0] += int(correct)
        groups[name][1] += 1

    for _ in range(args.prompts):
        prompt, spans = tasks.mqar(rng, words, pairs=args.pairs)
        asked = [prompt[:a - 1].rsplit(" ", 1)[1] for a, _ in spans]  # every key, once
        last_token = {k: tokenizer.encode(" " + k, add_special_tokens=False).ids[-1] for k in asked}
        endings = collections.Counter(last_token.values())
        for right, key in zip(train.answer_tokens_correct(model, tokenizer, prompt, spans), asked):
            shared = endings[last_token[key]] > 1
            count("all", all(right))
            count("key's last token ends another key" if shared else "key's last token its own", all(right))
            for i, r in enumerate(right):
                count(f"digit {i + 1}", r)
    for name, (right, total) in groups.items():
        print(f"{name:36s} {100 * right / total:5.1f}%  ({right}/{total})")


if __name__ == "__main__":
    main()

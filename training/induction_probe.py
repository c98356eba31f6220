"""How many steps a reference-model shape needs before it copies by content (an induction head):
rows of random tokens holding spans of random length that repeat after a random gap, the loss on
each repeat's tokens after its first. A model that copies drives that loss to near 0; before it
learns to, the loss stays at ln(vocabulary), the plateau the reference models did not leave on two
cores (docs/RESULTS.md, "Training the reference models").

    .venv-train/bin/python training/induction_probe.py --vocabulary 1000 --steps 1500

A fixed gap (--fixed-gap) is learned in about 100 steps by attending to a fixed offset, which is not
retrieval; the probe varies the gap so that only a content match predicts the copy.
"""
import argparse
import json
import random
import time

import torch
import transformers


def rows(rng, batch, context, vocabulary, fixed_gap):
    """Token ids and a mask of the positions whose next token is predictable by copying."""
    ids = torch.randint(10, 10 + vocabulary, (batch, context))
    target = torch.zeros(batch, context)
    for b in range(batch):
        position = 0
        while True:
            gap = 0 if fixed_gap else rng.randint(0, 16)
            length = context // 4 if fixed_gap else rng.randint(6, 30)
            start = position + gap
            if start + 2 * length > context:
                break
            span = torch.randint(10, 10 + vocabulary, (length,))
            ids[b, start:start + length] = span
            ids[b, start + length:start + 2 * length] = span
            target[b, start + length:start + 2 * length - 1] = 1  # predicting copy tokens 2..length
            position = start + 2 * length
    return ids, target


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocabulary", type=int, default=1000, help="distinct tokens the rows draw from")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--fixed-gap", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    # The llama preset of train.py.
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=704,
                                      num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=64, max_position_embeddings=args.context, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM._from_config(config, attn_implementation="sdpa")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    started = time.time()
    for step in range(args.steps):
        ids, target = rows(rng, args.batch, args.context, args.vocabulary, args.fixed_gap)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=ids).logits[:, :-1].float()
        losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                   reduction="none").view(args.batch, -1)
        copy_loss = (losses * target[:, :-1]).sum() / target[:, :-1].sum()
        losses.mean().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if step % 50 == 0 or step == args.steps - 1:
            print(json.dumps({"step": step, "copy_loss": round(float(copy_loss), 3),
                              "seconds": round(time.time() - started, 1)}), flush=True)


if __name__ == "__main__":
    main()

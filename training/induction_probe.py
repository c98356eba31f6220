"""How many steps a reference-model shape needs before it copies by content (an induction head):
rows of random tokens holding spans that repeat farther on (tasks.repeated_tokens), the loss on
each repeat's tokens after its first, and the same loss on rows whose copies lie farther from their
spans than any in 32-token training rows (`unseen_offsets`: only a content match predicts those).

    .venv-train/bin/python training/induction_probe.py --vocabulary 4000 --stages 64:400:40 \
        --warmup 30 --weight-decay 0 --copy-loss-only --supervise-attention 1

What it showed (docs/RESULTS.md, "Training speed and the induction plateau"):
- Unsupervised, the copy loss stays near ln(vocabulary) for hundreds to thousands of steps. Rows of
  32 tokens seem to leave that plateau within 100-300 steps, but `unseen_offsets` rises meanwhile:
  the model learns to copy from the few offsets short rows allow, not by content.
- With the two heads' attention supervised (attention_supervision) and the loss on the copies
  alone, both losses fall together from about step 100: 1.87 and 1.83 after 400 steps.
- A BOS token at each row's start (--bos) keeps the supervised induction head from forming, and so
  do copies no farther than 8 tokens from their spans.
- A fixed gap (--fixed-gap) is learned in about 100 steps by attending to a fixed offset.
"""
import argparse
import json
import random
import time

import torch
import transformers

import tasks
from attention_supervision import attention_loss, look_ups


def rows(rng, batch, context, vocabulary, fixed_gap, spans, max_gap, max_distance=None):
    """Token ids, a mask of the positions whose next token is predictable by copying, and for those
    positions the position an induction head attends to (-1 elsewhere)."""
    if fixed_gap:
        spans, max_gap = (context // 4, context // 4), 0
    ids = torch.zeros(batch, context, dtype=torch.long)
    target = torch.zeros(batch, context)
    attend = torch.full((batch, context), -1, dtype=torch.long)
    for b in range(batch):
        row, sources = tasks.repeated_tokens(rng, context, 10, 10 + vocabulary, spans, max_gap, max_distance)
        ids[b] = torch.tensor(row)
        for query, key in look_ups(sources):
            target[b, query] = 1
            attend[b, query] = key
    return ids, target, attend


def unseen_offsets(rng, vocabulary, rows=64, context=32, span=4):
    """Rows whose one copy sits 16 to 24 tokens after its span: farther than any copy in 32-token
    training rows (at most 12), so a head that copies by a learned offset fails here and only a
    content match predicts the copy."""
    ids = torch.randint(10, 10 + vocabulary, (rows, context),
                        generator=torch.Generator().manual_seed(rng.randrange(2**31)))
    target = torch.zeros(rows, context)
    for r in range(rows):
        start = rng.randint(0, 4)
        copy = start + span + rng.randint(12, 20)
        ids[r, copy:copy + span] = ids[r, start:start + span]
        target[r, copy:copy + span - 1] = 1
    return ids, target


def copy_loss_of(losses, target):
    return (losses * target[:, :-1]).sum() / target[:, :-1].sum()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocabulary", type=int, default=1000, help="distinct tokens the rows draw from")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--stages", help="row lengths and their steps, e.g. 32:300,128:200 (replaces "
                        "--context, --steps and --batch: 4096 tokens a step, spans and gaps from the length)")
    parser.add_argument("--fixed-gap", action="store_true")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--warmup", type=int, default=0, help="steps of linear learning-rate warm-up")
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--copy-loss-only", action="store_true", help="train on the copies' loss alone")
    parser.add_argument("--bos", action="store_true", help="rows begin with a BOS token (id 1)")
    parser.add_argument("--supervise-attention", type=float, default=0.0,
                        help="weight of a loss that leads two heads to the induction circuit's attention")
    parser.add_argument("--spans", default="6,30", help="shortest and longest repeated span")
    parser.add_argument("--max-gap", type=int, default=16, help="longest run of random tokens between spans")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    # The llama preset of train.py.
    config = transformers.LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=704,
                                      num_hidden_layers=args.layers, num_attention_heads=4, num_key_value_heads=2,
                                      head_dim=64, max_position_embeddings=4096, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM._from_config(
        config, attn_implementation="eager" if args.supervise_attention else "sdpa")
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=args.weight_decay)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / max(1, args.warmup)))
    started = time.time()
    if args.stages:
        stages = [[int(x) for x in stage.split(":")] + [None] for stage in args.stages.split(",")]
        plan = [(length, 4096 // length, None, None, distance) for length, steps, distance, *_ in stages
                for _ in range(steps)]
    else:
        plan = [(args.context, args.batch, tuple(int(x) for x in args.spans.split(",")), args.max_gap, None)] * args.steps
    args.steps = len(plan)
    for step, (context, batch, spans, max_gap, distance) in enumerate(plan):
        ids, target, attend = rows(rng, batch, context, args.vocabulary, args.fixed_gap, spans, max_gap, distance)
        if args.bos:
            ids[:, 0] = 1
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = model(input_ids=ids, output_attentions=bool(args.supervise_attention))
            logits = out.logits[:, :-1].float()
        losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1),
                                                   reduction="none").view(batch, -1)
        copy_loss = copy_loss_of(losses, target).detach()
        loss = copy_loss_of(losses, target) if args.copy_loss_only else losses.mean()
        attention = attention_loss(out.attentions, attend) if args.supervise_attention else torch.zeros(())
        loss = loss + args.supervise_attention * attention
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % args.every == 0 or step == args.steps - 1:
            with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
                far_ids, far_target = unseen_offsets(rng, args.vocabulary)
                far_logits = model(input_ids=far_ids).logits[:, :-1].float()
                far = copy_loss_of(torch.nn.functional.cross_entropy(
                    far_logits.reshape(-1, far_logits.shape[-1]), far_ids[:, 1:].reshape(-1),
                    reduction="none").view(far_ids.shape[0], -1), far_target)
            print(json.dumps({"step": step, "context": context, "copy_loss": round(float(copy_loss), 3),
                              "unseen_offsets": round(float(far), 3), "attention_loss": round(float(attention), 3),
                              "seconds": round(time.time() - started, 1)}), flush=True)


if __name__ == "__main__":
    main()

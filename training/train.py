"""Trains a kvsketch reference model and writes it as a Hugging Face model folder:
config.json, model.safetensors, tokenizer.json, tokenizer_config.json, generation_config.json and
training.json (the data, schedule, time and the validation figures below).

    .venv-train/bin/python training/train.py --model llama --out /tmp/llama

training/train_reference.sh holds the committed models' recipe (an induction warm-up, then a
curriculum to 2048 tokens) with PyTorch 2. The model is transformers' own LlamaForCausalLM /
Qwen2ForCausalLM, so the folder loads in transformers unchanged. Training is step-based and seeded
(same steps, same data order).

Validation after training: perplexity on held-out documents, passkey accuracy at each curriculum
context (greedy, exact match of the five digits), MQAR accuracy (every asked value exact).
"""
import argparse
import json
import math
import os
import random
import time

import torch
import transformers

import attention_supervision
import corpus
import tasks
import tokenizer_build

PRESETS = {
    # GQA with head_dim 64, SentencePiece-style tokenizer, bf16 weights
    "llama": dict(architecture="llama", tokenizer="sentencepiece", vocab_size=4096, hidden_size=256,
                  intermediate_size=704, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                  head_dim=64, dtype=torch.bfloat16),
    # q/k/v bias, one KV head for three query heads, byte-level tokenizer, f16 weights
    "qwen2": dict(architecture="qwen2", tokenizer="byte_level", vocab_size=4096, hidden_size=192,
                  intermediate_size=512, num_hidden_layers=4, num_attention_heads=3, num_key_value_heads=1,
                  head_dim=64, dtype=torch.float16),
}
# (fraction of steps, context[, mix]): a stage's own mix replaces MIX for its steps.
CURRICULUM = [(0.40, 256), (0.25, 512), (0.20, 1024), (0.15, 2048)]
MIX = {"text": 0.35, "passkey": 0.2, "needles": 0.15, "mqar": 0.15, "repeat": 0.15}
ANSWER_WEIGHT = 4.0


def make_config(preset, context):
    common = dict(vocab_size=preset["vocab_size"], hidden_size=preset["hidden_size"],
                  intermediate_size=preset["intermediate_size"], num_hidden_layers=preset["num_hidden_layers"],
                  num_attention_heads=preset["num_attention_heads"],
                  num_key_value_heads=preset["num_key_value_heads"], max_position_embeddings=context,
                  rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
                  torch_dtype=str(preset["dtype"]).replace("torch.", ""))
    if preset["architecture"] == "llama":
        return transformers.LlamaConfig(head_dim=preset["head_dim"], bos_token_id=1, eos_token_id=2,
                                        attn_implementation="eager", **common)
    return transformers.Qwen2Config(bos_token_id=None, eos_token_id=0, use_sliding_window=False,
                                    attn_implementation="eager", **common)


def encode(tokenizer, text, spans, limit):
    """Token ids of text (BOS as the tokenizer adds it) and per-token loss weights, cut to `limit`
    tokens from the left (the answers sit at the end)."""
    encoding = tokenizer.encode(text)
    ids, offsets = encoding.ids, encoding.offsets
    weights = [1.0] * len(ids)
    for i, (start, end) in enumerate(offsets):
        if any(start < b and end > a for a, b in spans) and end > start:
            weights[i] = ANSWER_WEIGHT
    if len(ids) > limit:
        ids, weights = ids[-limit:], weights[-limit:]
    return ids, weights, [None] * len(ids)


def single_row(rng, tokenizer, text, vocabulary, context, chars_per_token, mix):
    """One document sized to the context (a long one cut from the left, keeping its answers): token
    ids, loss weights, and per token the position it copies where that is known (else None)."""
    if "tokens" in mix:  # token-level documents: the kind is drawn here, text kinds in tasks.document
        kinds, weights = zip(*mix.items())
        kind = rng.choices(kinds, weights)[0]
        if kind == "tokens":
            # No BOS: with one, the supervised induction head did not form (attention_supervision).
            special = len(tokenizer_build.special_tokens(tokenizer))
            ids, sources = tasks.repeated_tokens(rng, context, special, tokenizer.get_vocab_size())
            # The random tokens are unpredictable: a loss on them would only drown the copies'.
            return ids, [0.0 if s is None else ANSWER_WEIGHT for s in sources], sources
        mix = {kind: 1.0}
    doc, spans = tasks.document(rng, text, vocabulary, int(context * chars_per_token * 0.97), mix)
    return encode(tokenizer, doc, spans, context)


def packed_row(rng, tokenizer, text, vocabulary, context, chars_per_token, mix):
    """Documents one after another (each from its BOS) until fewer than 32 tokens of the context are
    left: the synthetic documents are much shorter than a context, and padding them alone wasted
    most of each step. The first document is sized to the whole context, later ones to what is
    left."""
    ids, weights, sources = [], [], []
    while not ids or context - len(ids) >= 32:
        doc_ids, doc_weights, doc_sources = single_row(rng, tokenizer, text, vocabulary, context - len(ids),
                                                       chars_per_token, mix)
        sources += [s if s is None else s + len(ids) for s in doc_sources]
        ids += doc_ids
        weights += doc_weights
    return ids, weights, sources


def batch(rng, tokenizer, text, vocabulary, context, size, chars_per_token, mix, pack=False, fixed_length=False):
    """`size` rows of token ids, their mask and loss weights, and where an induction head looks from
    each position (-1 where unknown; attention_supervision), padded to the longest row or, with
    fixed_length, to the context (one shape per context, so that a compiled step compiles once)."""
    row = packed_row if pack else single_row
    rows = [row(rng, tokenizer, text, vocabulary, context, chars_per_token, mix) for _ in range(size)]
    length = context if fixed_length else max(len(r) for r, _, _ in rows)
    ids = torch.zeros(size, length, dtype=torch.long)
    mask = torch.zeros(size, length, dtype=torch.long)
    weight = torch.zeros(size, length)
    attend = torch.full((size, length), -1, dtype=torch.long)
    for i, (r, w, sources) in enumerate(rows):
        ids[i, :len(r)] = torch.tensor(r)
        mask[i, :len(r)] = 1
        weight[i, :len(r)] = torch.tensor(w)
        for query, key in attention_supervision.look_ups(sources):
            attend[i, query] = key
    return ids, mask, weight, attend


def weighted_loss(model, ids, mask, weight, attend=None, supervise=0.0):
    """The loss to train on (token losses weighted, answers more; with `supervise`, plus that weight
    times attention_supervision's loss) and the mean loss over answer tokens alone: the second falls
    steeply once the model learns to look back (the induction step)."""
    out = model(input_ids=ids, attention_mask=mask, output_attentions=supervise > 0)
    logits = out.logits[:, :-1].float()
    targets, w = ids[:, 1:], weight[:, 1:] * mask[:, 1:]
    losses = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                               reduction="none").view_as(w)
    answers = (w > 1.0).float()
    answer_loss = (losses * answers).sum() / answers.sum().clamp(min=1.0)
    loss = (losses * w).sum() / w.sum()
    attention = torch.zeros(())
    if supervise > 0:
        attention = attention_supervision.attention_loss(out.attentions, attend, mask)
        loss = loss + supervise * attention
    return loss, answer_loss.detach(), attention.detach()


@torch.no_grad()
def answer_tokens_correct(model, tokenizer, text, spans):
    """Per answer span, per token of it: whether the argmax after the true tokens before it is that token."""
    encoding = tokenizer.encode(text)
    ids = torch.tensor([encoding.ids])
    predicted = model(input_ids=ids).logits[0].argmax(-1)
    results = []
    for a, b in spans:
        positions = [i for i, (s, e) in enumerate(encoding.offsets) if s < b and e > a and e > s]
        results.append([int(predicted[p - 1]) == encoding.ids[p] for p in positions])
    return results


def answers_correct(model, tokenizer, text, spans):
    """Per answer span: whether greedy decoding reproduces it (every answer token the argmax)."""
    return [all(tokens) for tokens in answer_tokens_correct(model, tokenizer, text, spans)]


@torch.no_grad()
def validate(model, tokenizer, text, vocabulary, contexts, chars_per_token, samples, perplexity=True):
    model.eval()
    rng = random.Random(1234)
    nll, count = 0.0, 0
    for _ in range(samples if perplexity else 0):
        ids = torch.tensor([tokenizer.encode(tasks.haystack(rng, text, 512 * 4)).ids[:512]])
        loss = model(input_ids=ids, labels=ids).loss
        nll += float(loss) * (ids.shape[1] - 1)
        count += ids.shape[1] - 1
    report = {"validation_perplexity": math.exp(nll / count) if count else None, "passkey": {}, "mqar": None}
    for context in contexts:
        hits = [answers_correct(model, tokenizer, *tasks.passkey(rng, text, int(context * chars_per_token * 0.97)))[0]
                for _ in range(samples)]
        report["passkey"][str(context)] = sum(hits) / len(hits)
    hits = []
    for _ in range(samples):
        hits += answers_correct(model, tokenizer, *tasks.mqar(rng, vocabulary, pairs=32))
    report["mqar"] = sum(hits) / len(hits)
    model.train()
    return report


def main():
    global MIX, CURRICULUM, ANSWER_WEIGHT
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--tokens-per-step", type=int, default=4096)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--validation-samples", type=int, default=40)
    parser.add_argument("--init", help="a model folder to continue training from (its tokenizer is kept)")
    parser.add_argument("--mix", help="document kinds and weights as JSON, e.g. '{\"text\": 0.2, \"mqar\": 0.3}'")
    parser.add_argument("--curriculum", help="(fraction of steps, context[, mix]) stages as JSON, e.g. "
                        "'[[0.1, 64, {\"copy\": 0.5, \"mqar\": 0.5}], [0.9, 2048]]'")
    parser.add_argument("--answer-weight", type=float, default=ANSWER_WEIGHT)
    parser.add_argument("--stop-after", type=int, help="stop after this many steps of the --steps schedule")
    # The defaults are the first recipe, which runs on Debian's PyTorch 1.13 but does not learn
    # retrieval; train_reference.sh adds --autocast bf16 --compile --attention sdpa (PyTorch 2) and the
    # supervised warm-up.
    parser.add_argument("--autocast", choices=["bf16", "none"], default="none",
                        help="compute in bf16 under autocast (weights and optimizer stay float32); bf16 matrix "
                             "products run on AMX or AVX512-BF16 where the CPU has them")
    parser.add_argument("--compile", action=argparse.BooleanOptionalAction, default=False,
                        help="torch.compile the training step (compiled once per context)")
    parser.add_argument("--attention", choices=["eager", "sdpa"], default="eager",
                        help="transformers' attention implementation used in training")
    parser.add_argument("--pack", action=argparse.BooleanOptionalAction, default=False,
                        help="fill each row with documents one after another instead of padding one document")
    parser.add_argument("--max-key-tokens", type=int, default=3,
                        help="longest key word of needles and MQAR, in tokens (`kvsketch retrieval` asks any "
                             "3-9-letter word of its text)")
    parser.add_argument("--supervise-attention", type=float, default=1.0,
                        help="weight of attention_supervision's loss in the supervised steps")
    parser.add_argument("--supervised-steps", type=int, default=0,
                        help="the first N steps lead two heads to the induction circuit's attention "
                             "(on rows of the 'tokens' kind, whose copies are known)")
    parser.add_argument("--probe-every", type=int, default=0,
                        help="every N steps, print passkey accuracy at the current context and MQAR accuracy")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    preset = PRESETS[args.model]
    MIX = json.loads(args.mix) if args.mix else MIX
    CURRICULUM = [tuple(c) for c in json.loads(args.curriculum)] if args.curriculum else CURRICULUM
    ANSWER_WEIGHT = args.answer_weight
    context = CURRICULUM[-1][1]
    os.makedirs(args.out, exist_ok=True)
    started = time.time()

    train_docs = [t for _, t in corpus.documents("train")]
    validation_text = "\n\n".join(t for _, t in corpus.documents("validation"))
    train_text = "\n\n".join(train_docs)
    if args.init:
        from tokenizers import Tokenizer
        tokenizer = Tokenizer.from_file(os.path.join(args.init, "tokenizer.json"))
        facts = tokenizer_build.facts(preset["tokenizer"])
    else:
        tokenizer, facts = tokenizer_build.train(preset["tokenizer"], [t[:300000] for t in train_docs],
                                                 preset["vocab_size"])
    tokenizer.save(os.path.join(args.out, "tokenizer.json"))
    with open(os.path.join(args.out, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_build.tokenizer_config(facts, context), f, indent=2)
    sample = train_text[:2000000]
    chars_per_token = len(sample) / len(tokenizer.encode(sample).ids)
    vocabulary = [w for w in corpus.words(train_docs[::7])
                  if len(tokenizer.encode(" " + w).ids) <= args.max_key_tokens]
    print(f"tokenizer: {chars_per_token:.2f} chars/token, {len(vocabulary)} key words", flush=True)

    if args.init:
        model = transformers.AutoModelForCausalLM.from_pretrained(args.init, torch_dtype=torch.float32,
                                                                  attn_implementation=args.attention)
        model.config.max_position_embeddings = max(model.config.max_position_embeddings, context)
        model.config._name_or_path = ""  # the folder it came from is not part of the written model
    else:
        model = transformers.AutoModelForCausalLM.from_config(make_config(preset, context), torch_dtype=torch.float32,
                                                              attn_implementation=args.attention)
    parameters = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1)
    warmup = max(1, args.steps // 30)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / warmup) * (
        0.1 + 0.45 * (1 + math.cos(math.pi * min(1.0, s / args.steps)))))
    rng = random.Random(args.seed)
    boundaries, total = [], 0.0
    for fraction, length, *stage_mix in CURRICULUM:
        total += fraction
        boundaries.append((int(round(total * args.steps)), length, stage_mix[0] if stage_mix else MIX))
    log = []
    model.train()

    def train_step(ids, mask, weight, attend=None, supervise=0.0):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.autocast == "bf16"):
            loss, answer_loss, attention = weighted_loss(model, ids, mask, weight, attend, supervise)
        loss.backward()
        return loss.detach(), answer_loss, attention

    # Supervised steps need the attention probabilities (transformers' eager attention): not compiled.
    step_function = torch.compile(train_step) if args.compile else train_step
    last = min(args.steps, args.stop_after or args.steps) - 1
    for step in range(last + 1):
        length, mix = next((l, m) for b, l, m in boundaries if step < b)
        ids, mask, weight, attend = batch(rng, tokenizer, train_text, vocabulary, length,
                                          max(1, args.tokens_per_step // length), chars_per_token, mix, args.pack,
                                          args.compile)
        if step < args.supervised_steps:
            loss, answer_loss, attention = train_step(ids, mask, weight, attend, args.supervise_attention)
        else:
            loss, answer_loss, attention = step_function(ids, mask, weight)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        schedule.step()
        if step % 25 == 0 or step == last:
            elapsed = time.time() - started
            log.append({"step": step, "context": length, "loss": float(loss), "answer_loss": float(answer_loss),
                        **({"attention_loss": float(attention)} if step < args.supervised_steps else {}),
                        "seconds": round(elapsed, 1)})
            print(json.dumps(log[-1]), flush=True)
        if args.probe_every and (step + 1) % args.probe_every == 0:
            probe = validate(model, tokenizer, validation_text, vocabulary, [max(length, 256)], chars_per_token, 16,
                             perplexity=False)
            print(json.dumps({"step": step, "probe": probe}), flush=True)
        if (step + 1) % 250 == 0 or step == last:
            model.to(preset["dtype"]).save_pretrained(args.out, safe_serialization=True)
            model.float()
    training_seconds = time.time() - started
    model.float()
    # Passkey prompts need about 80 tokens: shorter warm-up stages are not validated.
    contexts = sorted({c[1] for c in CURRICULUM if c[1] >= 128})
    report = validate(model, tokenizer, validation_text, vocabulary, contexts,
                      chars_per_token, args.validation_samples)
    report.update({"preset": {k: (str(v) if k == "dtype" else v) for k, v in preset.items()},
                   "parameters": parameters, "steps": args.steps, "stopped_after": last + 1, "tokens_per_step": args.tokens_per_step,
                   "curriculum": CURRICULUM, "mix": MIX, "answer_weight": ANSWER_WEIGHT, "lr": args.lr,
                   "seed": args.seed, "threads": args.threads, "autocast": args.autocast, "compile": args.compile,
                   "attention": args.attention, "pack": args.pack,
                   "supervised_steps": args.supervised_steps, "max_key_tokens": args.max_key_tokens, "supervise_attention": args.supervise_attention, "init": args.init, "training_seconds": round(training_seconds, 1),
                   "torch": torch.__version__, "transformers": transformers.__version__, "log": log})
    model.generation_config.do_sample = False
    model.to(preset["dtype"]).save_pretrained(args.out, safe_serialization=True)
    with open(os.path.join(args.out, "training.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps({k: report[k] for k in ("validation_perplexity", "passkey", "mqar", "training_seconds")}))


if __name__ == "__main__":
    main()

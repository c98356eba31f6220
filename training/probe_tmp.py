import random, sys, torch, transformers, corpus, tasks
from tokenizers import Tokenizer
torch.set_num_threads(1)
path = sys.argv[1]
m = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
tok = Tokenizer.from_file(path + '/tokenizer.json')
text = open('../data/validation-text.txt').read()
rng = random.Random(5)
words = [w for w in corpus.words([text]) if len(tok.encode(' '+w).ids) <= 3]
def digit_acc(t, spans):
    e = tok.encode(t); ids = torch.tensor([e.ids])
    with torch.no_grad(): pred = m(input_ids=ids).logits[0].argmax(-1)
    ok = n = 0
    for a, b in spans:
        for i, (s, f) in enumerate(e.offsets):
            if s < b and f > a and f > s:
                ok += int(pred[i-1]) == e.ids[i]; n += 1
    return ok, n
for name, gen in [('passkey256', lambda: tasks.passkey(rng, text, 700)), ('passkey512', lambda: tasks.passkey(rng, text, 1500)),
                  ('mqar8', lambda: tasks.mqar(rng, words, pairs=8)), ('repeat', lambda: tasks.repeated_span(rng, text, 1500))]:
    ok = n = 0
    for _ in range(8):
        a, b = digit_acc(*gen()); ok += a; n += b
    print(name, round(ok / n, 3), flush=True)
ok = n = 0
for _ in range(8):
    a, b = digit_acc(*tasks.copy_words(rng, words, 600)); ok += a; n += b
print('copy', round(ok / n, 3))

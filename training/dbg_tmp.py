import random, torch, transformers, corpus, tasks
from tokenizers import Tokenizer
torch.set_num_threads(1)
import sys; path=sys.argv[1]
m = transformers.AutoModelForCausalLM.from_pretrained(path, torch_dtype=torch.float32).eval()
tok = Tokenizer.from_file(path + '/tokenizer.json')
text = open('../data/validation-text.txt').read()
rng = random.Random(5)
words = [w for w in corpus.words([text]) if len(tok.encode(' '+w).ids) <= 3]
t, spans = tasks.copy_words(rng, words, 300)
print(repr(t), spans)
e = tok.encode(t)
with torch.no_grad(): pred = m(input_ids=torch.tensor([e.ids])).logits[0].argmax(-1)
for i in range(len(e.ids)):
    print(i, repr(e.tokens[i]), e.offsets[i], repr(tok.id_to_token(int(pred[i-1]))) if i else '')

"""A loss that leads two attention heads to the induction circuit (a previous-token head in layer 0,
an induction head in layer 1) on rows whose copies are known (tasks.repeated_tokens).

Untrained, these heads form only after a long plateau: attention starts spread over every earlier
token, so the signal that would form either head is diluted by the row's length, and each head is
useful only once the other exists. On two cores the reference models did not leave that plateau in
their budget (docs/RESULTS.md, "Training speed and the induction plateau"). Supervising the two
attention patterns for the first few hundred steps removes the plateau; the heads' values and
outputs, and everything retrieval needs beyond copying, are still learned from the
language-modelling loss.
Two conditions the probe (induction_probe.py) found: rows without a BOS token (with one, the
induction head did not form), and copies up to half a row away from their spans (at most 8 tokens
away, it did not either).
"""
import torch


def look_ups(sources):
    """(query, key) positions of an induction head over a row whose tokens copy `sources` (per
    token the position it copies, or None): from the token before a copied one, the head looks at
    the copied token's source."""
    return [(p - 1, source) for p, source in enumerate(sources) if source is not None]


def attention_loss(attentions, attend, mask=None):
    """Mean cross-entropy of layer 0 head 0's attention against the previous token (at every
    position of `mask`, or every position) plus that of layer 1 head 0 against `attend`: per row
    and position, the position an induction head looks at (the token after the earlier occurrence
    of the current one), -1 where none is known. `attentions` as transformers returns them with
    output_attentions=True: per layer, (batch, heads, query, key) probabilities."""
    previous = attentions[0][:, 0].float()
    rows = torch.arange(1, previous.shape[1])
    previous_loss = -torch.log(previous[:, rows, rows - 1] + 1e-6)
    if mask is not None:
        valid = mask[:, 1:].float()
        previous_loss = (previous_loss * valid).sum() / valid.sum().clamp(min=1.0)
    else:
        previous_loss = previous_loss.mean()
    b, t = torch.nonzero(attend >= 0, as_tuple=True)
    if b.numel() == 0:
        return previous_loss
    induction = attentions[1][:, 0].float()
    return previous_loss - torch.log(induction[b, t, attend[b, t]] + 1e-6).mean()

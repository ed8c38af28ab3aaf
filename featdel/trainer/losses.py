"""Losses and per-token log-probabilities, kept outside the model.

In: logits `[batch, seq, vocab]` and token ids `[batch, seq]`, optionally a mask of the tokens
that count. Out: scalar losses and per-token log-probabilities. The model only maps tokens to
logits; the byte language model, the RL objective and distillation are different uses of the
same logits, so none of them lives in `Transformer.forward`.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def next_token_loss(logits, targets, mask=None):
    """Mean cross entropy of `targets` under `logits`, over the tokens where `mask` is true
    (all when None), computed in float32. A mask with no true entry gives 0 with a gradient
    of 0, not NaN."""
    per_token = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1),
                                reduction="none")
    if mask is None:
        return per_token.mean()
    weights = mask.reshape(-1).to(per_token.dtype)
    return (per_token * weights).sum() / weights.sum().clamp(min=1.0)


def token_logprobs(logits, tokens):
    """log p(tokens[b, t] | logits[b, t]) for every position, float32, `[batch, seq]`."""
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

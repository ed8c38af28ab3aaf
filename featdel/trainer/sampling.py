"""Sampling from the model with a KV cache, keeping each sampled token's log-probability.

In: a model, prompt token ids `[batch, prompt]`, how many tokens to add, a temperature and a
seed. Out: a `Sample` with the new tokens `[batch, new]` and their log-probabilities under the
sampling distribution's model (temperature 1 logits), which an RL objective needs as the
"old" policy's log-probabilities. The prompt runs once; each further step feeds one token and
reuses the cached keys and values, so decoding costs one position per step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    tokens: Any  # long [batch, new]: the sampled ids only
    logprobs: Any  # float32 [batch, new]: log p(token | everything before it), temperature 1


def sample(model, prompt, max_new_tokens: int, *, temperature: float = 1.0, top_k: int | None = None,
           seed: int = 0, stop: int | list[int] | None = None) -> Sample:
    """Sample `max_new_tokens` after `prompt` (`stop`: a token id, or several, after which a row
    only pads with the first of them). Greedy when temperature is 0."""
    import torch

    from featdel.trainer.model import KVCache

    if max_new_tokens < 1:
        raise ValueError("max_new_tokens must be >= 1")
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError("prompt must be [batch, at least one token]")
    g = torch.Generator(device=prompt.device).manual_seed(seed)
    cache = KVCache(len(model.layers))
    done = torch.zeros(prompt.shape[0], dtype=torch.bool, device=prompt.device)
    stops = None if stop is None else torch.tensor([stop] if isinstance(stop, int) else list(stop),
                                                     dtype=torch.long, device=prompt.device)
    tokens, logprobs = [], []
    with torch.no_grad():
        logits = model(prompt, cache)[:, -1].float()
        for _ in range(max_new_tokens):
            logp = torch.log_softmax(logits, dim=-1)
            choice = _choose(logits, temperature, top_k, g)
            if stops is not None and stops.numel():
                choice = torch.where(done, torch.full_like(choice, int(stops[0])), choice)
                done |= torch.isin(choice, stops)
            tokens.append(choice)
            logprobs.append(logp.gather(-1, choice[:, None]).squeeze(-1))
            logits = model(choice[:, None], cache)[:, -1].float()
    return Sample(tokens=torch.stack(tokens, dim=1), logprobs=torch.stack(logprobs, dim=1))


def _choose(logits, temperature: float, top_k: int | None, g):
    import torch

    if temperature == 0:
        return logits.argmax(dim=-1)
    scaled = logits / temperature
    if top_k is not None:
        kth = scaled.topk(top_k, dim=-1).values[:, -1:]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    return torch.multinomial(torch.softmax(scaled, dim=-1), 1, generator=g).squeeze(-1)

"""A torch model as an episode policy (`featdel.agent.policy.Policy`).

In: a `featdel.trainer.model.Transformer` (or a Hugging Face model wrapped by `featdel.trainer.hf`,
with its tokenizer's codec) and the episode's context ids. Out: a turn's ids and their
log-probabilities from `featdel.trainer.sampling.sample` (KV cache), stopping at the protocol's
newline.
"""

from __future__ import annotations

from featdel.agent.policy import BYTES, Codec


class TransformerPolicy:
    """Samples from a `featdel.trainer.model.Transformer` (or a Hugging Face model wrapped by
    `featdel.trainer.hf`, with its tokenizer's `codec`) until a stop token: the protocol's newline.

    `window`: how many of the latest context tokens the model sees (None: all of them; rotary
    positions have no hard limit, and the trainer scores whole sequences)."""

    def __init__(self, model, *, temperature: float = 1.0, top_k: int | None = None, window: int | None = None,
                 codec: Codec | None = None):
        self.model, self.temperature, self.top_k, self.window = model, temperature, top_k, window
        self.codec = codec or BYTES
        self._stops = [i for i in range(self.codec.vocab) if self.codec.is_stop(i)]

    def act(self, context, *, max_tokens, seed):
        import torch

        from featdel.trainer.sampling import sample

        ctx = list(context)[-self.window:] if self.window else list(context)
        device = next(self.model.parameters()).device
        prompt = torch.tensor([ctx or self._stops[:1]], dtype=torch.long, device=device)
        out = sample(self.model, prompt, max_tokens, temperature=self.temperature, top_k=self.top_k, seed=seed,
                     stop=self._stops)
        ids, logprobs = out.tokens[0].tolist(), out.logprobs[0].tolist()
        end = next((j + 1 for j, i in enumerate(ids) if self.codec.is_stop(i)), len(ids))
        return ids[:end], logprobs[:end]

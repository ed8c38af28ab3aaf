"""A local Hugging Face causal LM as the policy of `featdel train` (`--model PATH`, the `hf` extra).

In: a folder holding a `transformers` checkpoint and its tokenizer (nothing is downloaded:
`local_files_only`), a preset (rollout shape, step sizes), the world size. Out: what the
trainer builds for a preset model: the trained model (FSDP2-sharded per decoder layer on the
dense mesh under torchrun), its Sharded Muon (Muon for the 2-D weights inside the decoder
layers at matrix granularity, AdamW for embeddings, output head, norms and biases), the plain
copy rollouts sample from, the `ParallelDims`, and the tokenizer's `HFCodec` (turns end at any
token whose text holds a newline).

`HFCausalLM` gives the Hugging Face model the interface of `featdel.trainer.model.Transformer`
(`model(ids) -> logits`, `model(ids, cache)` for one-step decoding), so sampling, the RL update,
teachers and checkpoints are the same code for both.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path

import torch
from torch import nn


class HFCausalLM(nn.Module):
    def __init__(self, hf):
        super().__init__()
        self.hf = hf

    @property
    def layers(self):
        return self.hf.model.layers

    def forward(self, ids, cache=None):
        if cache is None:
            return self.hf(input_ids=ids, use_cache=False).logits
        # The KVCache object carries the library's own cache; transformers 5.x renamed the
        # argument and the output field from past_key_values to cache.
        name = "cache" if "cache" in inspect.signature(self.hf.forward).parameters else "past_key_values"
        out = self.hf(input_ids=ids, use_cache=True, **{name: getattr(cache, "past", None)})
        cache.past = getattr(out, name)
        return out.logits


class HFCodec:
    """A tokenizer as an episode's codec; `vocab` is the tokenizer's size. With a chat template
    (`chat`), the episode is a conversation in the model's own format (`ChatFrame`)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.vocab = len(tokenizer)
        self.chat = ChatFrame.of(tokenizer) if getattr(tokenizer, "chat_template", None) else None
        stops = {i for i in range(self.vocab) if "\n" in tokenizer.decode([i])}
        if self.chat is not None:
            stops.add(self.chat.end_id)  # the model's end of turn ends a turn too
        self._stops = frozenset(stops)
        if not self._stops:
            raise ValueError("the tokenizer has no token holding a newline: a turn could never end")
        if self.chat is not None:  # only a chat codec frames the episode; the others keep <obs> lines
            self.frame_prompt, self.frame_observation = self.chat.prompt, self._observation
            self.hint_insertion = self._hint_insertion

    def _observation(self, text: str, action_ids) -> str:
        return self.chat.observation(text, ended=bool(action_ids) and int(action_ids[-1]) == self.chat.end_id)

    def _hint_insertion(self, tokens, action_start: int, texts: list[str]) -> tuple[list[int], int]:
        """The hints as one user message before the assistant's header of the turn they target."""
        header = self.encode(self.chat.header)
        at = action_start - len(header)
        if at < 0 or list(tokens[at:action_start]) != header:
            at = action_start  # not a turn this codec framed: just before the action
        return self.encode(self.chat.user(HINT_PREFIX + "\n".join(texts))), at

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def is_stop(self, token_id: int) -> bool:
        return token_id in self._stops


HINT_PREFIX = "Hint: "


class ChatFrame:
    """A chat template's pieces, read off the template itself by rendering small conversations:
    the prompt (system and user message, then the assistant's header), a user message, and how an
    assistant message closes. So any template the tokenizer carries frames the episode."""

    def __init__(self, tokenizer, *, system: str, header: str, user_open: str, user_close: str,
                 assistant_close: str, end_id: int):
        self.tok, self.system, self.header = tokenizer, system, header
        self.user_open, self.user_close, self.assistant_close, self.end_id = user_open, user_close, assistant_close, end_id

    @classmethod
    def of(cls, tok, system: str | None = None) -> ChatFrame:
        from featdel.agent.protocol import CALL_FORMAT
        from featdel.agent.solve import SYSTEM

        # the tool-call protocol is one text line, not the chat API's tool calls: the model is told it
        system = f"{SYSTEM} {CALL_FORMAT}." if system is None else system

        def render(messages, gen=False) -> str:
            return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)

        base = [{"role": "system", "content": system}, {"role": "user", "content": "\x00U"}]
        asked, plain = render(base, gen=True), render(base)
        header = asked[len(plain):]
        user_open, _, user_close = plain[len(render(base[:1])):].partition("\x00U")
        answered = render([*base, {"role": "assistant", "content": "\x00A"}])
        assistant_close = answered.partition("\x00A")[2]
        end_id = next((i for i in tok.encode(assistant_close, add_special_tokens=False)
                       if i in set(tok.all_special_ids)), tok.eos_token_id)
        if not header or not user_open or end_id is None:
            raise ValueError("the chat template frames no assistant turn: cannot frame an episode with it")
        return cls(tok, system=system, header=header, user_open=user_open, user_close=user_close,
                   assistant_close=assistant_close, end_id=end_id)

    def prompt(self, text: str) -> str:
        return self.tok.apply_chat_template([{"role": "system", "content": self.system},
                                             {"role": "user", "content": text}], tokenize=False,
                                            add_generation_prompt=True)

    def user(self, text: str) -> str:
        return self.user_open + text + self.user_close

    def observation(self, text: str, *, ended: bool) -> str:
        """Close the assistant's message (its end token is there already when `ended`), the
        result as the next user message, then the assistant's header for the next turn."""
        end = self.tok.decode([self.end_id])
        close = self.assistant_close.partition(end)[2] if ended and end in self.assistant_close else self.assistant_close
        return close + self.user(text) + self.header


def load(path: Path, device: str = "cpu"):
    """(HFCausalLM, HFCodec) from a local checkpoint folder, float32."""
    from featdel.core.errors import TrainError

    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError:
        raise TrainError("--model needs transformers: pip install 'featdel[hf]'") from None
    if not (Path(path) / "config.json").is_file():
        raise TrainError(f"--model {path} is not a Hugging Face checkpoint folder (no config.json)")
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    hf = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32).to(device)
    return HFCausalLM(hf), HFCodec(tok)


def build_hf(path: Path, p, world: int, *, device: str = "cpu", seed: int = 0):
    """(model, optimizer, actor, dims, codec) for `featdel train --model PATH`."""
    from featdel.trainer.optim import ShardedMuon
    from featdel.trainer.parallel import ParallelDims, build_meshes

    torch.manual_seed(seed)
    model, codec = load(path, device)
    dims = ParallelDims(world_size=world) if world > 1 else None
    actor = model
    if dims is not None:
        from torch.distributed.fsdp import fully_shard

        actor = copy.deepcopy(model).requires_grad_(False)
        mesh = build_meshes(dims, device).dense
        for layer in model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    muon, adamw = [], []
    for name, param in model.named_parameters():
        (muon if param.dim() == 2 and ".layers." in name else adamw).append(param)
    groups = [{"params": muon, "granularity": "matrix", "lr": p.lr, "weight_decay": 0.1},
              {"params": adamw, "algorithm": "adamw", "lr": p.adamw_lr, "weight_decay": 0.1}]
    return model, ShardedMuon([g for g in groups if g["params"]]), actor, dims, codec

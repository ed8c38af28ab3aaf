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
    """A tokenizer as an episode's codec; `vocab` is the tokenizer's size."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.vocab = len(tokenizer)
        self._stops = frozenset(i for i in range(self.vocab) if "\n" in tokenizer.decode([i]))
        if not self._stops:
            raise ValueError("the tokenizer has no token holding a newline: a turn could never end")

    def encode(self, text: str) -> list[int]:
        return list(self.tok.encode(text, add_special_tokens=False))

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in ids])

    def is_stop(self, token_id: int) -> bool:
        return token_id in self._stops


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

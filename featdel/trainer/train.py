"""The training loop: batches from a data source in, a ShardedMuon-trained MoE transformer and its
losses out.

In: a `TrainConfig`, for a multi-rank run inside an initialised process group a `ParallelDims`,
and optionally a `DataSource` (default: the byte corpus) and a loss (default: next-token cross
entropy over the batch's mask). Out: a `TrainResult`: the global mean loss of every step, the
trained model and optimizer (and a checkpoint if asked). `train_step` is one step of it (loss,
backward, optimizer step), shared by the byte LM loop here and the RL loop.

Every rank builds the same model from the seed, then `parallelize` shards it, so any layout
starts from the same weights. The global batch is cut by data-parallel index (rows) and by CP
index (a contiguous slice of each sequence); each rank's loss is the mean over an equal number
of tokens, and FSDP2 averages gradients over all ranks of both meshes, so every layout takes
the same step as one process on the whole batch. The default corpus is this package's own
source (`featdel.trainer.data.ByteCorpus`), so nothing is downloaded. The config and git revision are logged first (modded-nanogpt style).
"""

from __future__ import annotations

import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    model: str = "debug"
    steps: int = 4
    batch_size: int = 8  # sequences per step, over all data-parallel ranks
    seq_len: int = 32
    lr: float = 0.02
    adamw_lr: float = 3e-3
    weight_decay: float = 0.1
    attention: str = "head"  # Muon granularity of attention weights: "head" or "matrix"
    experts: str = "expert"  # of expert weights: "expert" or "matrix"
    seed: int = 0
    save_at: int | None = None  # steps done when a checkpoint is written to checkpoint_dir
    checkpoint_dir: str | None = None
    resume: bool = False  # continue from checkpoint_dir
    device: str = "cpu"  # "cuda" needs a process group on NCCL and one GPU per rank

    def __post_init__(self):
        if self.model not in _preset_names():
            raise ValueError(f"model {self.model!r} is not a preset; use one of {_preset_names()}")
        if self.steps < 1 or self.batch_size < 1 or self.seq_len < 2:
            raise ValueError("need steps >= 1, batch_size >= 1 and seq_len >= 2")
        if (self.save_at is not None or self.resume) and not self.checkpoint_dir:
            raise ValueError("save_at and resume need checkpoint_dir")


def _preset_names() -> tuple[str, ...]:
    from featdel.trainer.model import PRESETS

    return tuple(PRESETS)


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainResult:
    losses: list[float]  # global mean loss of each step run
    model: Any
    optimizer: Any


def git_revision() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent,
                             capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def build(cfg: TrainConfig, dims=None):
    """The model (sharded when `dims` is given) and its ShardedMuon."""
    import torch

    from featdel.trainer.model import Transformer, optimizer_groups
    from featdel.trainer.optim import ShardedMuon
    from featdel.trainer.parallel import parallelize

    torch.manual_seed(cfg.seed)
    with torch.device(cfg.device):
        model = Transformer(cfg.model)
    if dims is not None:
        parallelize(model, dims, cfg.device)
    groups = optimizer_groups(model, lr=cfg.lr, adamw_lr=cfg.adamw_lr, weight_decay=cfg.weight_decay,
                              attention=cfg.attention, experts=cfg.experts)
    return model, ShardedMuon(groups)


def train_step(model, opt, batch, loss_fn=None):
    """One optimizer step on this rank's slice of a batch; returns the local loss (detached)."""
    from featdel.trainer.losses import next_token_loss

    loss = (loss_fn or next_token_loss)(model(batch.inputs), batch.targets, batch.mask)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss.detach()


def _local(batch, dp_idx: int, rows: int, cp_idx: int, cols: int, device: str):
    """This rank's rows (data parallel) and contiguous columns (context parallel) of a batch."""
    from featdel.trainer.data import Batch

    def cut(t):
        return None if t is None else t[dp_idx * rows:(dp_idx + 1) * rows, cp_idx * cols:(cp_idx + 1) * cols].to(device)

    return Batch(inputs=cut(batch.inputs), targets=cut(batch.targets), mask=cut(batch.mask))


def train(cfg: TrainConfig, dims=None, log=print, *, data=None, loss_fn=None) -> TrainResult:
    import torch.distributed as dist

    from featdel.trainer.checkpoint import load_checkpoint, save_checkpoint
    from featdel.trainer.data import ByteCorpus

    rank = dist.get_rank() if dims is not None else 0
    if log and rank == 0:
        log(f"train config={asdict(cfg)} dims={dims and asdict(dims)} git={git_revision()}")
    model, opt = build(cfg, dims)
    start = load_checkpoint(cfg.checkpoint_dir, model, opt) if cfg.resume else 0
    dp, cp = (dims.dp, dims.cp) if dims is not None else (1, 1)
    dp_idx, cp_idx = dims.batch_slice(rank) if dims is not None else (0, 0)
    if cfg.batch_size % dp or cfg.seq_len % cp:
        raise ValueError(f"batch_size={cfg.batch_size} must divide by dp={dp} and seq_len={cfg.seq_len} by cp={cp}")
    rows, cols = cfg.batch_size // dp, cfg.seq_len // cp
    data = data or ByteCorpus(batch_size=cfg.batch_size, seq_len=cfg.seq_len, seed=cfg.seed)
    losses = []
    for step in range(start, cfg.steps):
        loss = train_step(model, opt, _local(data.batch(step), dp_idx, rows, cp_idx, cols, cfg.device), loss_fn)
        mean = loss.clone()
        if dims is not None:
            dist.all_reduce(mean)
            mean /= dims.world_size
        losses.append(mean.item())
        if log and rank == 0:
            log(f"step {step + 1}/{cfg.steps} loss {losses[-1]:.6f} muon_bytes {opt.last_step_bytes}")
        if cfg.save_at == step + 1:
            save_checkpoint(cfg.checkpoint_dir, model, opt, step + 1)
    return TrainResult(losses=losses, model=model, optimizer=opt)


def full_parameters(model) -> dict:
    """Every parameter as a full plain tensor (a collective on sharded models: call on all ranks)."""
    from torch.distributed.tensor import DTensor

    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()
            for n, p in model.named_parameters()}

"""Data sources for the training loop: something that gives the global batch of a step.

In: a step number. Out: a `Batch` of inputs, targets and a loss mask, `[batch, seq]` each, the
same on every rank (the loop slices it by data-parallel and context-parallel index). The byte
corpus of this package's own source is one source; the RL loop's rollouts are another, behind
the same two-method interface.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol


@dataclass(frozen=True, kw_only=True, slots=True)
class Batch:
    inputs: Any  # long [batch, seq]
    targets: Any  # long [batch, seq]
    mask: Any = None  # bool [batch, seq]: which targets count; None = all


class DataSource(Protocol):
    def batch(self, step: int) -> Batch: ...


class ByteCorpus:
    """Random windows of a byte string, seeded per step, so any rank and any resume agree."""

    def __init__(self, *, batch_size: int, seq_len: int, seed: int = 0, data=None):
        import torch

        if data is None:
            text = b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))
            data = torch.tensor(list(text), dtype=torch.long)
        if data.numel() < seq_len + 2:
            raise ValueError(f"the corpus has {data.numel()} bytes, fewer than seq_len + 2 = {seq_len + 2}")
        self.data, self.batch_size, self.seq_len, self.seed = data, batch_size, seq_len, seed

    def batch(self, step: int) -> Batch:
        import torch

        g = torch.Generator().manual_seed(self.seed * 1_000_003 + step)
        starts = torch.randint(0, self.data.numel() - self.seq_len - 1, (self.batch_size,), generator=g)
        chunk = self.data[starts[:, None] + torch.arange(self.seq_len + 1)]
        return Batch(inputs=chunk[:, :-1], targets=chunk[:, 1:])

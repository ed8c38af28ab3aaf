"""Context parallelism for attention: each rank holds a contiguous slice of every sequence.

In: a CP process group; per layer the local keys and values `[batch, heads, seq/cp, head_dim]`.
Out: the keys and values of the whole sequence, on every rank of the group, differentiable.

Chosen for being simple and exactly correct rather than fast: the K/V slices are all-gathered
(each rank then runs causal attention of its own queries, at their global positions, over all
keys), and the backward all-reduces the gradient of the gathered tensor and keeps this rank's
slice, so each rank's K/V receives the gradient of every rank's loss. The loss then equals
the CP=1 loss; ring attention would save memory but not change the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist


class _GatherSequence(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cp):
        ctx.cp = cp
        parts = [torch.empty_like(x) for _ in range(cp.size)]
        dist.all_gather(parts, x.contiguous(), group=cp.group)
        return torch.cat(parts, dim=2)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad, group=ctx.cp.group)
        return grad.chunk(ctx.cp.size, dim=2)[ctx.cp.rank].contiguous(), None


@dataclass(frozen=True, kw_only=True, slots=True)
class ContextParallel:
    group: Any
    rank: int
    size: int

    def gather(self, x):
        """All slices of `x` along the sequence dim (2), in rank order."""
        return _GatherSequence.apply(x, self)

"""Shared helpers of the trainer tests: start real gloo ranks with fork, and a plain Muon.

`run_ranks` forks `world` processes, each with one thread and a gloo process group on a
FileStore (no ports to race for) with a 60 s timeout, so a hang fails fast; an exception in
any rank fails the test. `reference_muon` is per-matrix Muon written the obvious way (a loop
over matrices, unbatched matmuls), independent of the optimizer's batched code.
"""

from __future__ import annotations

import math

MUON_SPECS = {  # name: (shape, granularity, head_dim): one of each way to cut a weight
    "q": ((24, 16), "head_rows", 4),
    "o": ((16, 24), "head_cols", 4),
    "w": ((20, 12), "matrix", None),
    "experts": ((6, 12, 16), "expert", None),
    "stack": ((4, 8, 8), "matrix", None),
}


def _entry(rank, world, store, fn, args):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank,
                            world_size=world, timeout=timedelta(seconds=60))
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def run_ranks(fn, world: int, tmp_path, *args) -> None:
    import uuid

    import torch.multiprocessing as mp

    store = str(tmp_path / f"store-{uuid.uuid4().hex}")  # a FileStore is never reused
    mp.start_processes(_entry, args=(world, store, fn, args), nprocs=world, start_method="fork")


def reference_ns(m):

    x = m.double()
    tall = x.shape[0] > x.shape[1]
    if tall:
        x = x.T
    x = x / (x.norm() + 1e-7)
    for _ in range(5):
        a = x @ x.T
        x = 3.4445 * x + (-4.7750 * a + 2.0315 * a @ a) @ x
    return (x.T if tall else x).float()


def split_matrices(t, granularity, head_dim):
    """The matrices of `t` at `granularity`, as views (writes go to `t`)."""
    if granularity == "expert":
        return list(t) if t.dim() == 3 else [t]
    if granularity == "matrix":
        return [t.view(-1, t.shape[-1])]
    if granularity == "head_rows":
        return list(t.split(head_dim, dim=0))
    return list(t.split(head_dim, dim=1))


def reference_muon(params, grads_per_step, specs, lr, wd, momentum=0.95):
    """Per-matrix Muon with Nesterov over several steps; returns the final parameters."""
    import torch

    params = [p.clone() for p in params]
    bufs = [torch.zeros_like(p) for p in params]
    for grads in grads_per_step:
        for p, g, buf, (gran, hd) in zip(params, grads, bufs, specs):
            buf.mul_(momentum).add_(g, alpha=1 - momentum)
            u = (1 - momentum) * g + momentum * buf
            p.mul_(1 - lr * wd)
            for pm, um in zip(split_matrices(p, gran, hd), split_matrices(u, gran, hd)):
                pm.sub_(lr * 0.2 * math.sqrt(max(um.shape)) * reference_ns(um))
    return params

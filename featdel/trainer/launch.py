"""Process-group set-up for the trainer's entry points, so one command runs alone or under torchrun.

In: the environment `torchrun` sets (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) and
the device. Out: an initialised process group when WORLD_SIZE > 1 (gloo on CPU, NCCL on CUDA with
one GPU per local rank), torn down on exit; nothing at all for a single process.
"""

from __future__ import annotations

import contextlib
import os
from datetime import timedelta


@contextlib.contextmanager
def distributed(device: str = "cpu", timeout_s: float = 1800.0):
    """Yields (rank, world size)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        yield 0, 1
        return
    import torch
    import torch.distributed as dist

    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    dist.init_process_group("nccl" if device == "cuda" else "gloo", timeout=timedelta(seconds=timeout_s))
    try:
        yield dist.get_rank(), world
    finally:
        dist.destroy_process_group()

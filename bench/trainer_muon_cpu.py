"""CPU benchmark: Sharded Muon's optimizer step against full-matrix Muon and AdamW, on gloo ranks.

In: a model preset, a rank count, a number of timed steps (command-line flags).
Out: a table of median optimizer-step times and of bytes each rank sends per step, with ratios
measured side by side in one run (one process group, the same model and the same full-rank
random gradients for every optimizer).

Compared, all on the same ranks:
- sharded Muon: ShardedMuon on the FSDP2 shards, per head and per expert (the issue's design);
- sharded Muon, no overlap: the same, but each exchange is waited for as soon as it is
  launched (what the asynchronous pipeline buys);
- sharded Muon, full matrix: the same code with whole matrices (attention, a 3-D expert tensor
  as one tall matrix): shows what granularity does to balance and traffic;
- unsharded full-matrix Muon: every rank holds the whole model and orthogonalises every whole
  matrix itself (plain data-parallel Muon, no exchange, all work repeated on every rank);
- AdamW: torch.optim.AdamW (foreach) on the FSDP2 shards.
Optimizers take turns step by step, so load from other processes falls on all of them alike.
On a machine with fewer cores than ranks the ranks share cores, so times measure total CPU
work more than parallel speed; ratios, not absolute times, are the result.

    python bench/trainer_muon_cpu.py --preset tiny --world 4 --steps 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path


def _rank(rank, world, store, args, out):
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.FileStore(store, world), rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    try:
        result = _measure(rank, world, args)
        if rank == 0:
            Path(out).write_text(json.dumps(result))
    finally:
        dist.destroy_process_group()


def _measure(rank, world, args):
    import copy

    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import distribute_tensor

    from featdel.trainer.model import Transformer, optimizer_groups
    from featdel.trainer.optim import ShardedMuon
    from featdel.trainer.parallel import ParallelDims, parallelize

    dims = ParallelDims(world_size=world, dp_replicate=args.replicate, ep=world)
    torch.manual_seed(0)
    model = Transformer(args.preset)
    plain = copy.deepcopy(model)
    parallelize(model, dims)
    g = torch.Generator().manual_seed(1)
    grads = {n: torch.randn(p.shape, generator=g) for n, p in plain.named_parameters()}
    for n, p in model.named_parameters():
        p.grad = distribute_tensor(grads[n], p.device_mesh, p.placements)
    for n, p in plain.named_parameters():
        p.grad = grads[n]
    optimizers = {
        "sharded Muon, per head and expert": ShardedMuon(optimizer_groups(model)),
        "sharded Muon, no overlap": ShardedMuon(optimizer_groups(model), overlap=False),
        "sharded Muon, full matrix": ShardedMuon(optimizer_groups(model, attention="matrix", experts="matrix")),
        "unsharded full-matrix Muon": ShardedMuon(optimizer_groups(plain, attention="matrix", experts="matrix")),
        "AdamW on FSDP2 shards": torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True),
    }
    times = {name: [] for name in optimizers}
    for i in range(args.warmup + args.steps):  # interleaved, so load from elsewhere hits all alike
        for name, opt in optimizers.items():
            dist.barrier()
            t0 = time.perf_counter()
            opt.step()
            dist.barrier()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - t0)
    rows = {}
    for name, opt in optimizers.items():
        sent = torch.tensor(float(getattr(opt, "last_step_bytes", 0)))
        dist.all_reduce(sent)
        rows[name] = {"step_s": statistics.median(times[name]), "bytes_per_rank": sent.item() / world}
    n_params = sum(p.numel() for p in plain.parameters())
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "preset": args.preset, "world": world, "params": n_params,
        "dense_mesh": list(dims.dense_shape), "expert_mesh": list(dims.expert_shape),
        "steps": args.steps, "torch": torch.__version__, "rows": rows,
        # all-gathering every fp32 momentum matrix whole onto every rank: the naive alternative
        "allgather_bytes_per_rank": 4 * n_params * (world - 1) / world,
    }


def report(res) -> str:
    base = res["rows"]["sharded Muon, per head and expert"]
    lines = [f"trainer_muon_cpu {res['date']}: preset {res['preset']} ({res['params']:,} params), "
             f"{res['world']} gloo ranks, dense mesh {tuple(res['dense_mesh'])}, expert mesh "
             f"{tuple(res['expert_mesh'])}, median of {res['steps']} steps, torch {res['torch']}",
             f"{'optimizer':36s} {'step ms':>9s} {'x sharded Muon':>15s} {'MB sent/rank':>13s}"]
    for name, row in res["rows"].items():
        lines.append(f"{name:36s} {1e3 * row['step_s']:9.1f} {row['step_s'] / base['step_s']:15.2f}"
                     f" {row['bytes_per_rank'] / 1e6:13.3f}")
    lines.append(f"Muon bytes per rank / all-gathering full fp32 momentum: "
                 f"{base['bytes_per_rank'] / res['allgather_bytes_per_rank']:.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--replicate", type=int, default=1, help="dp_replicate of the dense mesh")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        mp.start_processes(_rank, args=(args.world, str(Path(tmp) / f"store-{uuid.uuid4().hex}"), args, str(out)),
                           nprocs=args.world, start_method="fork")
        res = json.loads(out.read_text())
    print(report(res))
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""ShardedMuon on FSDP2 shards over 4 and 8 gloo ranks equals single-process per-matrix Muon.

Pins: with full-rank fp32 gradients, after several steps every parameter (heads cut from rows
or columns that straddle shard boundaries, uneven shards, experts, a stacked tensor as one
matrix, AdamW vectors) equals the reference within 1e-5, with the parameters spread over a 1-D
FSDP mesh and a 2-D HSDP mesh at once and buckets small enough to pipeline several exchanges;
experts sharded on their expert dimension exchange no bytes, while a whole matrix cut into
shards exchanges exactly its off-owner part, there and back; waiting for each exchange at once
(overlap off) gives the same result.
"""

import pytest

torch = pytest.importorskip("torch")

from trainer_helpers import MUON_SPECS as SPECS  # noqa: E402
from trainer_helpers import reference_muon, run_ranks  # noqa: E402

STEPS, LR, WD = 3, 0.05, 0.1
EXTRA = {"experts8": ((8, 12, 16), "expert", None)}
ALL = {**SPECS, **EXTRA}


def _data():
    g = torch.Generator().manual_seed(0)
    params = {n: torch.randn(*s, generator=g) for n, (s, _, _) in ALL.items()}
    params["bias"] = torch.randn(10, generator=g)
    grads = [{n: torch.randn(p.shape, generator=g) for n, p in params.items()} for _ in range(STEPS)]
    return params, grads


def _sharded_run(rank, world, out, overlap):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import distribute_tensor

    from featdel.trainer.optim import ShardedMuon

    params, grads = _data()
    flat = init_device_mesh("cpu", (world,))
    hsdp = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    root = torch.nn.Module()
    root.a, root.b = torch.nn.Module(), torch.nn.Module()
    for i, (n, p) in enumerate(params.items()):
        setattr(root.a if i % 2 else root.b, n, torch.nn.Parameter(p.clone()))
    fully_shard(root.a, mesh=flat)
    fully_shard(root.b, mesh=hsdp)
    live = {n.split(".")[-1]: p for n, p in root.named_parameters()}
    groups = [{"params": [live[n]], "granularity": gran, "head_dim": hd} for n, (_, gran, hd) in ALL.items()]
    groups.append({"params": [live["bias"]], "algorithm": "adamw", "lr": 1e-2})
    opt = ShardedMuon(groups, lr=LR, weight_decay=WD, bucket_numel=300, overlap=overlap)
    for step in grads:
        for n, p in live.items():
            p.grad = distribute_tensor(step[n], p.device_mesh, p.placements)
        opt.step()
    full = {n: p.full_tensor() for n, p in live.items()}
    assert len(opt._buckets) > 4  # several buckets in flight, not one
    # Bytes: experts on their expert dim never move; one whole matrix moves its off-owner part.
    only = {
        "experts8": ShardedMuon([live["experts8"]], granularity="expert"),
        "w": ShardedMuon([live["w"]]),
    }
    sent = {}
    for n, o in only.items():
        live[n].grad = distribute_tensor(grads[0][n], live[n].device_mesh, live[n].placements)
        o.step()
        total = torch.tensor(float(o.last_step_bytes))
        dist.all_reduce(total, group=live[n].device_mesh.get_group(live[n].device_mesh.ndim - 1))
        sent[n] = total.item()
    if rank == 0:
        torch.save({"full": full, "sent": sent}, out)


@pytest.mark.slow
@pytest.mark.parametrize("world, overlap", [(4, True), (8, True), (4, False)])
def test_sharded_muon_equals_single_process_reference(world, overlap, tmp_path):
    out = tmp_path / "out.pt"
    run_ranks(_sharded_run, world, tmp_path, str(out), overlap)
    got = torch.load(out)
    params, grads = _data()
    names = list(ALL)
    want = reference_muon([params[n] for n in names], [[s[n] for n in names] for s in grads],
                          [(ALL[n][1], ALL[n][2]) for n in names], lr=LR, wd=WD)
    for n, w in zip(names, want):
        assert torch.allclose(got["full"][n], w, atol=1e-5, rtol=0), (n, (got["full"][n] - w).abs().max())
    bias = torch.nn.Parameter(params["bias"].clone())
    ref = torch.optim.AdamW([bias], lr=1e-2, weight_decay=WD, betas=(0.9, 0.95), foreach=False)
    for s in grads:
        bias.grad = s["bias"].clone()
        ref.step()
    assert torch.allclose(got["full"]["bias"], bias.detach(), atol=1e-6, rtol=0)
    assert got["sent"]["experts8"] == 0
    # "w" is 20 x 12 on the shard group (size world or world/2): its owner, rank 0 of the group,
    # holds ceil(20/k) rows; every other element goes there and back in fp32.
    k = world if list(ALL).index("w") % 2 else world // 2
    assert got["sent"]["w"] == 2 * 4 * (240 - -(-20 // k) * 12)

"""Training gives the same result on every layout, and checkpoints continue bit-identically.

Pins: one process trains the debug MoE with finite losses and changes every parameter;
dual-mesh HSDP (dense mesh 2x2, expert mesh 1x4) equals plain FSDP (both meshes 1x4) equals
one process on the whole batch, in losses and final weights (fp32, 1e-5); a DCP checkpoint
written mid-run on 4 ranks, loaded by a fresh run on the same layout, continues with
bit-identical losses and weights, and loads on another layout (FSDP on 4 ranks, and one
process) to continue within 1e-5.
"""

import pytest

torch = pytest.importorskip("torch")

from trainer_helpers import run_ranks  # noqa: E402

from featdel.trainer.parallel import ParallelDims  # noqa: E402
from featdel.trainer.train import TrainConfig, full_parameters, train  # noqa: E402

CFG = TrainConfig(steps=4, batch_size=8, seq_len=32)
HSDP = {"dp_replicate": 2, "ep": 4}
FSDP = {"ep": 4}


def test_single_process_smoke_changes_every_parameter():
    torch.manual_seed(CFG.seed)
    from featdel.trainer.model import Transformer

    before = {n: p.detach().clone() for n, p in Transformer(CFG.model).named_parameters()}
    result = train(TrainConfig(steps=2), None, log=None)
    assert all(torch.isfinite(torch.tensor(loss)) for loss in result.losses)
    after = full_parameters(result.model)
    unchanged = [n for n in before if torch.equal(before[n], after[n])]
    assert not unchanged


def test_bad_train_config_says_what_to_fix():
    with pytest.raises(ValueError, match="not a preset"):
        TrainConfig(model="huge")
    with pytest.raises(ValueError, match="need checkpoint_dir"):
        TrainConfig(save_at=2)


def _layouts(rank, world, out):
    results = {}
    for name, kw in (("fsdp", FSDP), ("hsdp", HSDP)):
        r = train(CFG, ParallelDims(world_size=world, **kw), log=None)
        results[name] = {"losses": r.losses, "params": full_parameters(r.model)}
    if rank == 0:
        torch.save(results, out)


def _close(a, b, tol):
    assert a.keys() == b.keys()
    for n in a:
        assert torch.allclose(a[n], b[n], atol=tol, rtol=0), (n, (a[n] - b[n]).abs().max())


@pytest.mark.slow
def test_hsdp_equals_fsdp_equals_one_process(tmp_path):
    run_ranks(_layouts, 4, tmp_path, str(tmp_path / "out.pt"))
    got = torch.load(tmp_path / "out.pt")
    one = train(CFG, None, log=None)
    want = full_parameters(one.model)
    for name in ("fsdp", "hsdp"):
        assert max(abs(a - b) for a, b in zip(got[name]["losses"], one.losses)) < 1e-5, name
        _close(got[name]["params"], want, 1e-5)


def _checkpoint(rank, world, ckpt, out):
    import dataclasses

    first = train(dataclasses.replace(CFG, checkpoint_dir=ckpt, save_at=2), ParallelDims(world_size=world, **HSDP), log=None)
    resumed = dataclasses.replace(CFG, checkpoint_dir=ckpt, resume=True)
    same = train(resumed, ParallelDims(world_size=world, **HSDP), log=None)
    other = train(resumed, ParallelDims(world_size=world, **FSDP), log=None)
    full = [full_parameters(r.model) for r in (first, same, other)]
    if rank == 0:
        torch.save({"losses": [first.losses, same.losses, other.losses], "params": full}, out)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")  # the one-process load
def test_checkpoint_continues_bit_identically(tmp_path):
    ckpt = tmp_path / "ckpt"
    run_ranks(_checkpoint, 4, tmp_path, str(ckpt), str(tmp_path / "out.pt"))
    got = torch.load(tmp_path / "out.pt")
    (first, same, other), (p_first, p_same, p_other) = got["losses"], got["params"]
    assert len(same) == 2 and same == first[2:]
    assert all(torch.equal(p_first[n], p_same[n]) for n in p_first)
    assert max(abs(a - b) for a, b in zip(other, first[2:])) < 1e-5
    _close(p_other, p_first, 1e-5)
    single = train(TrainConfig(**{**_fields(CFG), "checkpoint_dir": str(ckpt), "resume": True}), None, log=None)
    assert max(abs(a - b) for a, b in zip(single.losses, first[2:])) < 1e-5
    _close(full_parameters(single.model), p_first, 1e-5)


def _fields(cfg):
    import dataclasses

    return {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}

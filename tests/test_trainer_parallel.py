"""ParallelDims validates itself and lays out two meshes; the CP=2/EP=8 layout trains on 8 ranks.

Pins: bad degrees fail when the dataclass is built, with a message naming the fix; the dense
mesh is (dp_replicate, dp_shard*cp) and the expert mesh (world/ep, ep), so CP=2 with EP=8 needs
8 ranks where one grid with both axes needs 16; on 8 real gloo ranks that layout puts one
whole expert per rank, attention runs context-parallel, its experts need no Muon exchange, and
its losses equal one process with CP=1 on the same global batch.
"""

import pytest

torch = pytest.importorskip("torch")

from trainer_helpers import run_ranks  # noqa: E402

from featdel.trainer.parallel import ParallelDims  # noqa: E402


def test_mission_example_fits_in_8_ranks_not_16():
    dims = ParallelDims(world_size=8, dp_replicate=4, cp=2, ep=8)
    assert dims.dp_shard == 1
    assert dims.dense_shape == (4, 2) and dims.expert_shape == (1, 8)
    assert dims.single_mesh_ranks == 16
    assert [dims.batch_slice(r) for r in (0, 1, 7)] == [(0, 0), (0, 1), (3, 1)]


def test_dp_shard_fills_what_is_left():
    assert ParallelDims(world_size=8, dp_replicate=2).dp_shard == 4


@pytest.mark.parametrize("kwargs, message", [
    ({"world_size": 8, "tp": 2}, "set tp=1"),
    ({"world_size": 8, "cp": 3}, "not divisible by dp_replicate\\*cp\\*tp=3"),
    ({"world_size": 8, "dp_shard": 2}, "= 2 but world_size = 8; change a degree or set dp_shard=-1"),
    ({"world_size": 8, "ep": 3}, "ep=3 must divide world_size=8"),
    ({"world_size": 8, "cp": 0}, "cp must be >= 1"),
])
def test_bad_degrees_fail_with_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ParallelDims(**kwargs)


def _cp2_ep8(rank, world, out):
    from torch.distributed.tensor import DTensor

    from featdel.trainer.train import TrainConfig, train

    dims = ParallelDims(world_size=world, dp_replicate=4, cp=2, ep=8)
    result = train(TrainConfig(steps=3, batch_size=8, seq_len=32), dims, log=None)
    moe = result.model.layers[1].mlp
    w1 = moe.experts.w1
    assert isinstance(w1, DTensor) and w1.device_mesh.shape == (1, 8) and w1.to_local().shape[0] == 1
    wq = result.model.layers[1].attn.wq.weight
    assert wq.device_mesh.shape == (4, 2)
    assert result.model.layers[0].attn.cp.size == 2
    on_expert_mesh = [b for b in result.optimizer._buckets if b.info.ranks == tuple(range(8))]
    assert len(on_expert_mesh) == 2 and not any(b.exchange for b in on_expert_mesh)  # [8,16,32], [8,32,16]
    if rank == 0:
        torch.save(result.losses, out)


@pytest.mark.slow
def test_cp2_ep8_trains_on_8_ranks_like_one_process(tmp_path):
    from featdel.trainer.train import TrainConfig, train

    run_ranks(_cp2_ep8, 8, tmp_path, str(tmp_path / "losses.pt"))
    got = torch.load(tmp_path / "losses.pt")
    want = train(TrainConfig(steps=3, batch_size=8, seq_len=32), None, log=None).losses
    assert len(got) == 3 and max(abs(a - b) for a, b in zip(got, want)) < 1e-5, (got, want)

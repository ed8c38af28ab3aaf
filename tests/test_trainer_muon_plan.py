"""The exchange plan agrees between ranks, moves every element exactly once, and balances work.

Pins (for 4 simulated ranks, no process group needed): what rank r sends to rank o is what o
expects from r; each rank's shard is sent whole and each owned matrix is filled exactly once;
matrices held whole by one rank stay there (no exchange for experts sharded on the expert
dim); split matrices of equal cost spread evenly over the ranks.
"""

import pytest

torch = pytest.importorskip("torch")

from featdel.trainer.muon_plan import ShardInfo, plan_buckets  # noqa: E402

K = 4


def _entries(rank, specs):
    out = []
    for i, (shape, gran, hd) in enumerate(specs):
        row = 1
        for s in shape[1:]:
            row *= s
        info = ShardInfo(group=None, ranks=tuple(range(K)), rank=rank, rows=shape[0], row_numel=row)
        out.append((i, shape, info, gran, hd))
    return out


def _plans(specs, bucket_numel=1 << 20):
    return [plan_buckets(_entries(r, specs), bucket_numel, loads={}) for r in range(K)]


SPECS = [((20, 12), "matrix", None)] * 8 + [((8, 12, 16), "expert", None), ((16, 24), "head_cols", 4),
                                            ((24, 16), "head_rows", 4), ((7, 5, 6), "expert", None)]


@pytest.mark.parametrize("bucket_numel", [1 << 20, 500])
def test_ranks_agree_and_every_element_moves_once(bucket_numel):
    plans = _plans(SPECS, bucket_numel)
    assert len({len(p) for p in plans}) == 1
    for b in range(len(plans[0])):
        buckets = [p[b] for p in plans]
        assert all(bk.owners == buckets[0].owners for bk in buckets)
        for r in range(K):
            for o in range(K):
                assert buckets[r].send_splits[o] == buckets[o].recv_splits[r]
        for bk in buckets:
            assert torch.equal(bk.send_index.sort().values, torch.arange(bk.local_numel))
            assert torch.equal(bk.recv_pos.sort().values, torch.arange(bk.owned * bk.rows * bk.cols))


def test_whole_experts_stay_home_and_split_matrices_spread_evenly():
    plans = _plans(SPECS)
    by_shape = {(bk.rows, bk.cols): bk for bk in plans[0]}
    experts = by_shape[(12, 16)]
    assert experts.owners == [0, 0, 1, 1, 2, 2, 3, 3] and not experts.exchange
    odd = by_shape[(5, 6)]  # 7 experts in chunks of 2: the last rank holds one
    assert odd.owners == [0, 0, 1, 1, 2, 2, 3] and not odd.exchange
    whole = by_shape[(20, 12)]
    assert sorted(whole.owners) == [0, 0, 1, 1, 2, 2, 3, 3] and whole.exchange
    heads = by_shape[(16, 4)]  # every head of the output projection spans all ranks
    assert heads.exchange and max(heads.owners.count(r) for r in range(K)) == 2

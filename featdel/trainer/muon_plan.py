"""Where each Muon matrix lives, who orthogonalises it, and how the shards get there and back.

In: the Muon parameters of a `ShardedMuon` (plain tensors, or FSDP2 DTensors sharded on dim 0
over one mesh dimension and replicated over the others) and each one's granularity.
Out: `Bucket`s. A bucket packs whole parameters whose matrices share one shape and one shard
group; its plan says which rank owns (runs Newton-Schulz on) each matrix, and holds the index
tensors that turn the local shards into the send buffer of one `all_to_all_single`, the
received buffer into the owner's `[n, rows, cols]` batch, and the way back.

Why index tensors: FSDP2 shards dim 0, so a rank's shard is one contiguous flat range of the
full tensor. A matrix of any granularity is a set of flat indices of the full tensor, so one
rule covers whole matrices, heads cut from rows or columns, and experts. Owners are chosen
so that a matrix held whole by one rank never moves (experts sharded on the expert dim need
no exchange at all) and the rest go, largest first, to the least loaded rank.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from featdel.trainer.newton_schulz import newton_schulz_flops

GRANULARITIES = ("matrix", "expert", "head_rows", "head_cols")


def matrix_shape(shape: tuple[int, ...], granularity: str, head_dim: int | None) -> tuple[int, int, int]:
    """(count, rows, cols) of the matrices a parameter of `shape` is cut into."""
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity {granularity!r} is unknown; use one of {GRANULARITIES}")
    if len(shape) not in (2, 3):
        raise ValueError(f"Muon needs 2-D or 3-D parameters, got shape {shape}; give it to AdamW")
    if granularity == "expert" or (granularity == "matrix" and len(shape) == 2):
        return (shape[0], shape[1], shape[2]) if len(shape) == 3 else (1, shape[0], shape[1])
    if granularity == "matrix":  # a 3-D tensor as one tall matrix: full-matrix Muon
        return 1, shape[0] * shape[1], shape[2]
    if len(shape) != 2 or not head_dim:
        raise ValueError(f"{granularity} needs a 2-D parameter and head_dim > 0 (got {shape}, {head_dim})")
    axis = 0 if granularity == "head_rows" else 1
    if shape[axis] % head_dim:
        raise ValueError(f"dim {axis} of {shape} is not a multiple of head_dim={head_dim}")
    n = shape[axis] // head_dim
    return (n, head_dim, shape[1]) if axis == 0 else (n, shape[0], head_dim)


def to_matrices(full, granularity: str, head_dim: int | None):
    """The full tensor as `[count, rows, cols]` (a view where the layout allows)."""
    n, r, c = matrix_shape(tuple(full.shape), granularity, head_dim)
    if granularity == "head_cols":
        return full.view(r, n, c).permute(1, 0, 2)
    return full.reshape(n, r, c)


def from_matrices(mats, shape: tuple[int, ...], granularity: str):
    """Inverse of `to_matrices`: `[count, rows, cols]` back to the parameter's shape."""
    if granularity == "head_cols":
        return mats.permute(1, 0, 2).reshape(shape)
    return mats.reshape(shape)


@dataclass(frozen=True, kw_only=True, slots=True)
class ShardInfo:
    """How one parameter is split over its shard group (k == 1: not split)."""

    group: Any
    ranks: tuple[int, ...]
    rank: int
    rows: int  # size of dim 0 of the full tensor
    row_numel: int

    @property
    def size(self) -> int:
        return len(self.ranks)

    @property
    def chunk_numel(self) -> int:
        # torch.chunk semantics, as FSDP2 uses: ceil(rows / k) rows per rank, the last ones short.
        return -(-self.rows // self.size) * self.row_numel


def shard_info(param) -> ShardInfo:
    from torch.distributed.tensor import DTensor, Replicate, Shard

    row_numel = 1
    for s in param.shape[1:]:
        row_numel *= s
    if not isinstance(param, DTensor):
        return ShardInfo(group=None, ranks=(0,), rank=0, rows=param.shape[0], row_numel=row_numel)
    mesh, shard_dims = param.device_mesh, []
    for i, pl in enumerate(param.placements):
        if isinstance(pl, Shard) and pl.dim == 0:
            shard_dims.append(i)
        elif not isinstance(pl, Replicate):
            raise ValueError(f"ShardedMuon takes DTensors sharded on dim 0 (FSDP2), got {param.placements}")
    if len(shard_dims) > 1:
        raise ValueError(f"dim 0 is sharded over {len(shard_dims)} mesh dims; shard it over one")
    if not shard_dims:
        return ShardInfo(group=None, ranks=(0,), rank=0, rows=param.shape[0], row_numel=row_numel)
    d = shard_dims[0]
    import torch.distributed as dist

    group = mesh.get_group(d)
    return ShardInfo(group=group, ranks=tuple(dist.get_process_group_ranks(group)),
                     rank=mesh.get_local_rank(d), rows=param.shape[0], row_numel=row_numel)


@dataclass(kw_only=True, slots=True)
class Bucket:
    """Whole parameters of one matrix shape and one shard group, and their exchange plan."""

    members: list[int]  # indices into the optimizer's list of Muon parameters
    rows: int
    cols: int
    info: ShardInfo
    local_offsets: list[int] = field(default_factory=list)
    local_numel: int = 0
    owned: int = 0  # matrices this rank orthogonalises
    exchange: bool = False  # does any element of this bucket cross ranks, on any rank
    send_index: Any = None
    send_splits: list[int] = field(default_factory=list)
    recv_pos: Any = None
    recv_splits: list[int] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)


def plan_buckets(entries, bucket_numel: int, loads: dict) -> list[Bucket]:
    """Group `entries` (index, full shape, ShardInfo, granularity, head_dim) into planned buckets.

    `loads` maps a shard group's ranks to each rank's Newton-Schulz FLOPs so far, so owners are
    balanced over all buckets of a group, not just within one.
    """
    groups: dict[tuple, list] = {}
    for e in entries:
        idx, shape, info, gran, hd = e
        _, r, c = matrix_shape(shape, gran, hd)
        groups.setdefault((r, c, info.ranks), []).append(e)
    buckets = []
    for (r, c, _ranks), members in groups.items():
        current, size = [], 0
        for e in members:
            numel = 1
            for s in e[1]:
                numel *= s
            if current and size + numel > bucket_numel:
                buckets.append(_plan(current, r, c, loads))
                current, size = [], 0
            current.append(e)
            size += numel
        buckets.append(_plan(current, r, c, loads))
    return buckets


def _plan(members, r: int, c: int, loads: dict) -> Bucket:
    import torch

    info = members[0][2]
    k, me = info.size, info.rank
    bucket = Bucket(members=[e[0] for e in members], rows=r, cols=c, info=info)
    load = loads.setdefault(info.ranks, [0] * k)
    cost = newton_schulz_flops(r, c)
    if k == 1:  # not sharded: the optimizer takes views of the local tensors, no index maps
        bucket.owned = sum(matrix_shape(e[1], e[3], e[4])[0] for e in members)
        load[0] += cost * bucket.owned
        return bucket
    holders, local_idx = [], []
    for _, shape, sinfo, gran, hd in members:
        numel = sinfo.rows * sinfo.row_numel
        flat = to_matrices(torch.arange(numel).view(shape), gran, hd).reshape(-1, r * c)
        holder = torch.div(flat, sinfo.chunk_numel, rounding_mode="floor")
        lo = min(me * sinfo.chunk_numel, numel)
        bucket.local_offsets.append(bucket.local_numel)
        local_idx.append(flat - lo + bucket.local_numel)
        bucket.local_numel += min((me + 1) * sinfo.chunk_numel, numel) - lo
        holders.append(holder)
    holder, local_idx = torch.cat(holders), torch.cat(local_idx)
    whole = (holder == holder[:, :1]).all(dim=1)
    owners = [-1] * holder.shape[0]
    for j in torch.nonzero(whole).flatten().tolist():
        owners[j] = int(holder[j, 0])
        load[owners[j]] += cost
    for j in torch.nonzero(~whole).flatten().tolist():  # all the same cost: least loaded rank
        o = min(range(k), key=lambda q: (load[q], q))
        owners[j] = o
        load[o] += cost
    owner = torch.tensor(owners, dtype=torch.long)
    bucket.owners = owners
    bucket.exchange = bool((holder != owner[:, None]).any())
    mine = holder == me
    send_keys = owner[:, None].expand_as(holder)[mine]
    order = torch.argsort(send_keys, stable=True)
    bucket.send_index = local_idx[mine][order]
    bucket.send_splits = torch.bincount(send_keys, minlength=k).tolist()
    owned = holder[owner == me]
    bucket.owned = owned.shape[0]
    keys = owned.reshape(-1)
    bucket.recv_pos = torch.argsort(keys, stable=True)
    bucket.recv_splits = torch.bincount(keys, minlength=k).tolist()
    return bucket

"""Parallel layout: a validated `ParallelDims`, its two device meshes, and `parallelize`.

In: the world size and the degrees of data-parallel replication, data-parallel sharding,
context parallelism and expert sharding (tensor parallelism stays 1).
Out: `Meshes` over the same ranks, and a model whose routed experts are FSDP2-sharded on the
expert mesh and whose other weights are FSDP2-sharded on the dense mesh.

Ranks are laid out as (dp_replicate, dp_shard, cp), cp fastest. The dense mesh is
(dp_replicate, dp_shard * cp): a narrow FSDP group (neighbouring ranks, one node or rack) for
the few dense weights, replicated across the rest (HSDP). The expert mesh is
(world / ep, ep): a wider group, so expert weights, most of the parameters and most of Muon's
work, spread over more ranks; FSDP2 shards them on the expert dimension. Because the two are
separate meshes, cp and ep need not be axes of one grid: CP=2 with EP=8 fits on 8 ranks,
where one mesh with both axes needs 16.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class ParallelDims:
    world_size: int
    dp_replicate: int = 1
    dp_shard: int = -1  # -1: whatever world_size leaves
    cp: int = 1
    ep: int = 1
    tp: int = 1

    def __post_init__(self):
        for name in ("world_size", "dp_replicate", "cp", "ep", "tp"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.tp != 1:
            raise ValueError(f"tensor parallelism is not implemented; set tp=1 (got tp={self.tp})")
        if self.dp_shard == -1:
            rest = self.dp_replicate * self.cp * self.tp
            if self.world_size % rest:
                raise ValueError(f"world_size={self.world_size} is not divisible by dp_replicate*cp*tp"
                                 f"={rest}; change dp_replicate or cp")
            object.__setattr__(self, "dp_shard", self.world_size // rest)
        if self.dp_shard < 1:
            raise ValueError(f"dp_shard must be >= 1 or -1 (fill), got {self.dp_shard}")
        product = self.dp_replicate * self.dp_shard * self.cp * self.tp
        if product != self.world_size:
            raise ValueError(f"dp_replicate*dp_shard*cp*tp = {product} but world_size = {self.world_size};"
                             " change a degree or set dp_shard=-1 to fill")
        if self.world_size % self.ep:
            raise ValueError(f"ep={self.ep} must divide world_size={self.world_size}: the expert mesh"
                             f" is (world_size/ep replicas) x (ep shards)")

    @property
    def dense_shape(self) -> tuple[int, int]:
        return self.dp_replicate, self.dp_shard * self.cp

    @property
    def expert_shape(self) -> tuple[int, int]:
        return self.world_size // self.ep, self.ep

    @property
    def dp(self) -> int:
        """How many ways the batch is split (CP ranks share a batch slice)."""
        return self.dp_replicate * self.dp_shard

    @property
    def single_mesh_ranks(self) -> int:
        """Ranks one shared mesh needs at least, with cp and ep as separate axes of one grid."""
        return max(self.world_size, self.cp * self.ep * self.tp)

    def batch_slice(self, rank: int) -> tuple[int, int]:
        """(data-parallel index, cp index) of a rank."""
        return rank // self.cp, rank % self.cp


@dataclass(frozen=True, kw_only=True, slots=True)
class Meshes:
    dense: Any
    expert: Any
    cp: Any  # None when cp == 1


def build_meshes(dims: ParallelDims, device: str = "cpu") -> Meshes:
    """The dense and expert meshes (and the CP group) over the current process group."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    if dist.get_world_size() != dims.world_size:
        raise ValueError(f"ParallelDims says world_size={dims.world_size}, the process group has"
                         f" {dist.get_world_size()} ranks")
    dense = init_device_mesh(device, dims.dense_shape, mesh_dim_names=("dp_replicate", "dp_shard_cp"))
    expert = init_device_mesh(device, dims.expert_shape, mesh_dim_names=("ep_replicate", "ep_shard"))
    cp = None
    if dims.cp > 1:
        cp = init_device_mesh(device, (dims.world_size // dims.cp, dims.cp), mesh_dim_names=("dp", "cp"))
    return Meshes(dense=dense, expert=expert, cp=cp)


def parallelize(model, dims: ParallelDims, device: str = "cpu") -> Meshes:
    """FSDP2 `fully_shard`: routed experts on the expert mesh, everything else on the dense mesh."""
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard

    from featdel.trainer.context_parallel import ContextParallel
    from featdel.trainer.model import MoE

    meshes = build_meshes(dims, device)
    if meshes.cp is not None:
        cp = ContextParallel(group=meshes.cp.get_group("cp"), rank=meshes.cp.get_local_rank("cp"), size=dims.cp)
        if cp.rank != dist.get_rank() % dims.cp:
            raise RuntimeError("CP group does not follow the (dp_replicate, dp_shard, cp) rank layout")
        for block in model.layers:
            block.attn.cp = cp
    for block in model.layers:
        if isinstance(block.mlp, MoE):
            fully_shard(block.mlp.experts, mesh=meshes.expert)
        fully_shard(block, mesh=meshes.dense)
    fully_shard(model, mesh=meshes.dense)
    return meshes

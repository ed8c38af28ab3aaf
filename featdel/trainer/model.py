"""A decoder-only MoE transformer built from a `ModelConfig`, with named presets.

In: a `ModelConfig` (or a preset name from `PRESETS`), byte token ids `[batch, seq]`, and for
incremental decoding a `KVCache`. Out: logits `[batch, seq, 256]`. Losses live outside the
model (`featdel.trainer.losses`), so the byte LM, the RL objective and distillation share it.

Blocks are pre-norm: multi-head attention (separate q/k/v/o projections or one fused qkv) with
rotary positions, then either a dense SwiGLU MLP (layers listed in `dense_layers`) or an MoE
layer: a top-k softmax router, routed experts and always-on shared experts, each kept as 3-D
`[experts, out, in]` tensors so FSDP2 shards them on the expert dimension and Muon can
orthogonalise each expert alone. Routed experts are their own module because FSDP2 gathers a
module's weights when that module's forward runs. `optimizer_groups` says which weights Muon
takes (and at which granularity) and which AdamW takes. Context parallelism is the attention's
business only: see `featdel.trainer.context_parallel`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

VOCAB = 256  # byte-level: token id == byte value; nothing to download


class LayerCache:
    """One layer's keys and values so far, `[batch, heads, seen, head_dim]` (None before any)."""

    __slots__ = ("k", "v")

    def __init__(self) -> None:
        self.k = self.v = None


class KVCache:
    """Keys and values of every layer for the tokens seen so far, for decoding one step at a time."""

    def __init__(self, n_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(n_layers)]
        self.length = 0


def encode(text: str) -> list[int]:
    return list(text.encode("utf-8"))


def decode(ids) -> str:
    return bytes(int(i) for i in ids).decode("utf-8", errors="replace")


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelConfig:
    dim: int
    n_layers: int
    n_heads: int
    head_dim: int
    n_routed_experts: int
    n_shared_experts: int = 1
    top_k: int = 2
    expert_hidden: int
    dense_layers: tuple[int, ...] = (0,)
    dense_hidden: int
    fused_qkv: bool = False
    max_seq_len: int = 256
    rope_theta: float = 10000.0

    def __post_init__(self):
        for name in ("dim", "n_layers", "n_heads", "head_dim", "n_routed_experts", "top_k",
                     "expert_hidden", "dense_hidden", "max_seq_len"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.top_k > self.n_routed_experts:
            raise ValueError(f"top_k={self.top_k} exceeds n_routed_experts={self.n_routed_experts}; lower top_k")
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} must be even for rotary positions")
        bad = [i for i in self.dense_layers if not 0 <= i < self.n_layers]
        if bad:
            raise ValueError(f"dense_layers {bad} are outside 0..{self.n_layers - 1}")

    def n_params(self) -> int:
        attn = 4 * self.dim * self.n_heads * self.head_dim
        n_dense = len(set(self.dense_layers))
        moe = (3 * self.dim * self.expert_hidden * (self.n_routed_experts + self.n_shared_experts)
               + self.dim * self.n_routed_experts)
        per_layer_norms = 2 * self.dim
        return (2 * VOCAB * self.dim + self.dim + self.n_layers * (attn + per_layer_norms)
                + n_dense * 3 * self.dim * self.dense_hidden + (self.n_layers - n_dense) * moe)


PRESETS = {
    "debug": ModelConfig(dim=32, n_layers=2, n_heads=4, head_dim=8, n_routed_experts=8, top_k=2,
                         expert_hidden=16, dense_hidden=64, max_seq_len=64),
    "tiny": ModelConfig(dim=128, n_layers=4, n_heads=4, head_dim=32, n_routed_experts=16, top_k=2,
                        expert_hidden=64, dense_hidden=256, fused_qkv=True),
    "small": ModelConfig(dim=512, n_layers=8, n_heads=8, head_dim=64, n_routed_experts=32, top_k=4,
                         expert_hidden=256, dense_hidden=1536, max_seq_len=1024),
    "medium": ModelConfig(dim=1024, n_layers=16, n_heads=16, head_dim=64, n_routed_experts=64,
                          top_k=6, expert_hidden=512, dense_hidden=3072, max_seq_len=2048),
    "large": ModelConfig(dim=2048, n_layers=24, n_heads=16, head_dim=128, n_routed_experts=64,
                         top_k=6, expert_hidden=1024, dense_hidden=6144, max_seq_len=4096),
    "xl": ModelConfig(dim=4096, n_layers=32, n_heads=32, head_dim=128, n_routed_experts=64,
                      top_k=6, expert_hidden=2048, dense_hidden=12288, max_seq_len=4096),
}


def rope(x, positions, theta: float):
    """Rotary position embedding of `x` `[batch, heads, seq, head_dim]` at `positions` `[seq]`."""
    half = x.shape[-1] // 2
    freqs = theta ** (-torch.arange(half, dtype=torch.float32, device=x.device) / half)
    angles = positions.to(torch.float32)[:, None] * freqs[None, :]
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg, inner = cfg, cfg.n_heads * cfg.head_dim
        if cfg.fused_qkv:
            self.wqkv = nn.Linear(cfg.dim, 3 * inner, bias=False)
        else:
            self.wq, self.wk, self.wv = (nn.Linear(cfg.dim, inner, bias=False) for _ in range(3))
        self.wo = nn.Linear(inner, cfg.dim, bias=False)
        self.cp = None  # a ContextParallel, set by parallelize when cp > 1

    def forward(self, x, kv: LayerCache | None = None, start: int = 0):
        b, s, _ = x.shape
        if self.cfg.fused_qkv:
            q, k, v = self.wqkv(x).chunk(3, dim=-1)
        else:
            q, k, v = self.wq(x), self.wk(x), self.wv(x)
        q, k, v = (t.view(b, s, self.cfg.n_heads, self.cfg.head_dim).transpose(1, 2) for t in (q, k, v))
        if self.cp and kv is not None:
            raise ValueError("a KV cache is for decoding on one rank's whole sequence, not with context parallelism")
        offset = self.cp.rank * s if self.cp else start
        pos = torch.arange(offset, offset + s, device=x.device)
        q, k = rope(q, pos, self.cfg.rope_theta), rope(k, pos, self.cfg.rope_theta)
        if self.cp:  # every rank attends over the whole sequence's keys, causally
            k, v = self.cp.gather(k), self.cp.gather(v)
        if kv is not None:  # earlier tokens' keys and values come first
            if kv.k is not None:
                k, v = torch.cat([kv.k, k], dim=2), torch.cat([kv.v, v], dim=2)
            kv.k, kv.v = k, v
        keys = torch.arange(k.shape[2], device=x.device)
        mask = keys[None, :] <= pos[:, None]
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


def swiglu(x, w1, w3, w2):
    """SwiGLU with weights in `[out, in]` layout: w2 @ (silu(w1 @ x) * (w3 @ x))."""
    return (F.silu(x @ w1.T) * (x @ w3.T)) @ w2.T


class Experts(nn.Module):
    """`n` SwiGLU experts as 3-D tensors: w1, w3 `[n, hidden, dim]`, w2 `[n, dim, hidden]`."""

    def __init__(self, n: int, dim: int, hidden: int):
        super().__init__()
        self.w1 = nn.Parameter(torch.randn(n, hidden, dim) * dim**-0.5)
        self.w3 = nn.Parameter(torch.randn(n, hidden, dim) * dim**-0.5)
        self.w2 = nn.Parameter(torch.randn(n, dim, hidden) * hidden**-0.5)

    def forward(self, x, expert_idx=None, weights=None):
        """Shared (no routing): the sum of all experts. Routed: each token's top-k, weighted."""
        out = torch.zeros_like(x)
        for e in range(self.w1.shape[0]):
            if expert_idx is None:
                out = out + swiglu(x, self.w1[e], self.w3[e], self.w2[e])
                continue
            token, slot = torch.nonzero(expert_idx == e, as_tuple=True)
            if token.numel():
                y = swiglu(x[token], self.w1[e], self.w3[e], self.w2[e]) * weights[token, slot, None]
                out = out.index_add(0, token, y)
        return out


class MoE(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.top_k = cfg.top_k
        self.router = nn.Linear(cfg.dim, cfg.n_routed_experts, bias=False)
        self.experts = Experts(cfg.n_routed_experts, cfg.dim, cfg.expert_hidden)
        self.shared = Experts(cfg.n_shared_experts, cfg.dim, cfg.expert_hidden) if cfg.n_shared_experts else None

    def forward(self, x):
        shape, x = x.shape, x.reshape(-1, x.shape[-1])
        probs = self.router(x).float().softmax(dim=-1)
        weights, idx = probs.topk(self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(x.dtype)
        out = self.experts(x, idx, weights)
        if self.shared is not None:
            out = out + self.shared(x)
        return out.view(shape)


class DenseMLP(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.dim, cfg.dense_hidden, bias=False)
        self.w3 = nn.Linear(cfg.dim, cfg.dense_hidden, bias=False)
        self.w2 = nn.Linear(cfg.dense_hidden, cfg.dim, bias=False)

    def forward(self, x):
        return swiglu(x, self.w1.weight, self.w3.weight, self.w2.weight)


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer: int):
        super().__init__()
        self.attn_norm, self.mlp_norm = nn.RMSNorm(cfg.dim), nn.RMSNorm(cfg.dim)
        self.attn = Attention(cfg)
        self.mlp = DenseMLP(cfg) if layer in cfg.dense_layers else MoE(cfg)

    def forward(self, x, kv: LayerCache | None = None, start: int = 0):
        x = x + self.attn(self.attn_norm(x), kv, start)
        return x + self.mlp(self.mlp_norm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig | str):
        super().__init__()
        self.cfg = cfg = PRESETS[cfg] if isinstance(cfg, str) else cfg
        self.embed = nn.Embedding(VOCAB, cfg.dim)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = nn.RMSNorm(cfg.dim)
        self.head = nn.Linear(cfg.dim, VOCAB, bias=False)

    def forward(self, tokens, cache: KVCache | None = None):
        """Logits of every position; with `cache`, `tokens` continue the cached ones."""
        start = cache.length if cache is not None else 0
        x = self.embed(tokens)
        for i, layer in enumerate(self.layers):
            x = layer(x, cache.layers[i] if cache is not None else None, start)
        if cache is not None:
            cache.length += tokens.shape[1]
        return self.head(self.norm(x))


def optimizer_groups(model: Transformer, *, lr: float = 0.02, adamw_lr: float = 3e-3,
                     weight_decay: float = 0.1, attention: str = "head", experts: str = "expert"):
    """Parameter groups for `ShardedMuon`: Muon per head / per expert, AdamW for the rest.

    `attention` is "head" or "matrix", `experts` is "expert" or "matrix": the granularity of
    each kind of weight, so the same model can be trained with full-matrix Muon to compare.
    """
    hd = model.cfg.head_dim
    rows, cols, expert, matrix, adamw = [], [], [], [], []
    for name, p in model.named_parameters():
        leaf = name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
        if p.dim() < 2 or leaf in ("embed", "router", "head"):
            adamw.append(p)
        elif ".attn." in name:
            (cols if leaf == "wo" else rows).append(p)
        elif p.dim() == 3:
            expert.append(p)
        else:
            matrix.append(p)
    head = attention == "head"
    groups = [
        {"params": rows, "granularity": "head_rows" if head else "matrix", "head_dim": hd},
        {"params": cols, "granularity": "head_cols" if head else "matrix", "head_dim": hd},
        {"params": expert, "granularity": experts},
        {"params": matrix, "granularity": "matrix"},
        {"params": adamw, "algorithm": "adamw", "lr": adamw_lr},
    ]
    return [dict(g, lr=g.get("lr", lr), weight_decay=weight_decay) for g in groups if g["params"]]

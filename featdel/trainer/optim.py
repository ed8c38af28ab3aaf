"""ShardedMuon: Muon at each matrix's natural granularity on FSDP2 shards, AdamW for the rest.

In: parameters or parameter groups, like any torch optimizer. A group's `algorithm` is "muon"
(2-D/3-D weights) or "adamw" (embeddings, norms, biases, router, output head); a Muon group's
`granularity` is "matrix" (the whole matrix; a 3-D tensor as one tall matrix), "expert" (each
`[out, in]` slice of an `[experts, out, in]` tensor), "head_rows" or "head_cols" (each
`head_dim` block of rows, as in q/k/v, or of columns, as in the output projection).
Out: `step()` updates the parameters in place; `last_step_bytes` is how many bytes this rank
sent to other ranks during the last Muon step.

Muon per matrix: buf = lerp(buf, g, 1 - momentum); u = lerp(g, buf, momentum) with Nesterov,
else buf; O = NewtonSchulz5(u) * 0.2 * sqrt(max(rows, cols)); p = p * (1 - lr * wd) - lr * O.
On plain tensors in one process this is exactly per-matrix Muon. On FSDP2 DTensors the
momentum stays sharded (element-wise work is local), and per bucket of same-shape matrices
one `all_to_all_single` brings whole matrices to their owners, Newton-Schulz runs batched
there, and a second one returns the results. The next bucket's exchange is launched before the
current bucket's Newton-Schulz, and results travel back while later buckets compute, so
communication overlaps compute (`overlap=False` waits for each exchange, for comparison). Newton-Schulz and the
exchange run in fp32 on CPU and bf16 on GPU unless `ns_dtype` says otherwise. The state holds
DTensors shaped like the parameters, so `torch.distributed.checkpoint` saves and reshards it.
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from featdel.trainer.muon_plan import from_matrices, matrix_shape, plan_buckets, shard_info, to_matrices
from featdel.trainer.newton_schulz import muon_scale, newton_schulz


def _local(t):
    from torch.distributed.tensor import DTensor

    return t.to_local() if isinstance(t, DTensor) else t


class ShardedMuon(torch.optim.Optimizer):
    def __init__(self, params, lr: float = 0.02, *, momentum: float = 0.95, nesterov: bool = True,
                 weight_decay: float = 0.0, granularity: str = "matrix", head_dim: int | None = None,
                 algorithm: str = "muon", betas: tuple[float, float] = (0.9, 0.95), eps: float = 1e-8,
                 ns_steps: int = 5, ns_dtype: torch.dtype | None = None, bucket_numel: int = 1 << 24,
                 overlap: bool = True):
        if lr < 0 or weight_decay < 0 or not 0 <= momentum < 1:
            raise ValueError(f"need lr >= 0, weight_decay >= 0, 0 <= momentum < 1 (got {lr}, {weight_decay}, {momentum})")
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay,
                        granularity=granularity, head_dim=head_dim, algorithm=algorithm, betas=betas, eps=eps)
        super().__init__(params, defaults)
        self.ns_steps, self.ns_dtype, self.bucket_numel = ns_steps, ns_dtype, bucket_numel
        self.overlap = overlap  # False: wait for each exchange at once (to measure what overlap buys)
        for group in self.param_groups:
            if group["algorithm"] not in ("muon", "adamw"):
                raise ValueError(f"algorithm {group['algorithm']!r} is unknown; use 'muon' or 'adamw'")
            if group["algorithm"] == "muon":
                for p in group["params"]:
                    matrix_shape(tuple(p.shape), group["granularity"], group["head_dim"])
        self._buckets, self._n_planned = None, 0
        self.last_step_bytes = 0

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            if group["algorithm"] == "adamw":
                for p in group["params"]:
                    if p.grad is not None:
                        self._adamw(p, group)
        self._muon_step()
        return loss

    def _adamw(self, p, group):
        state = self.state[p]
        if not state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p)
            state["exp_avg_sq"] = torch.zeros_like(p)
        lr, wd, (b1, b2), eps = group["lr"], group["weight_decay"], group["betas"], group["eps"]
        x, g = _local(p), _local(p.grad)
        m, v = _local(state["exp_avg"]), _local(state["exp_avg_sq"])
        state["step"] += 1
        t = state["step"].item()
        x.mul_(1 - lr * wd)
        m.lerp_(g, 1 - b1)
        v.mul_(b2).addcmul_(g, g, value=1 - b2)
        denom = (v.sqrt() / math.sqrt(1 - b2**t)).add_(eps)
        x.addcdiv_(m, denom, value=-lr / (1 - b1**t))

    def _muon_params(self):
        return [(p, g) for g in self.param_groups if g["algorithm"] == "muon" for p in g["params"]]

    def _plan(self):
        params = self._muon_params()
        if self._buckets is None or self._n_planned != len(params):
            entries = [(i, tuple(p.shape), shard_info(p), g["granularity"], g["head_dim"])
                       for i, (p, g) in enumerate(params)]
            self._buckets = plan_buckets(entries, self.bucket_numel, loads={})
            self._n_planned = len(params)
            for bk in self._buckets:  # index maps live where the shards live (no per-step copies)
                device = _local(params[bk.members[0]][0]).device
                held = sum(_local(params[i][0]).numel() for i in bk.members)
                if bk.info.size > 1 and held != bk.local_numel:
                    raise RuntimeError(f"local shards hold {held} elements, the plan expects {bk.local_numel}:"
                                       " ShardedMuon assumes FSDP2's even dim-0 chunks (torch.chunk)")
                if bk.send_index is not None:
                    bk.send_index, bk.recv_pos = bk.send_index.to(device), bk.recv_pos.to(device)
        return params, self._buckets

    def _momentum(self, p, group):
        """Update the (local) momentum and return the local matrix to orthogonalise."""
        state = self.state[p]
        if "momentum_buffer" not in state:
            state["momentum_buffer"] = torch.zeros_like(p)
        buf = _local(state["momentum_buffer"])
        if p.grad is None:  # every rank must still take part in the exchange
            return torch.zeros_like(buf)
        g = _local(p.grad)
        buf.lerp_(g, 1 - group["momentum"])
        return g.lerp(buf, group["momentum"]) if group["nesterov"] else buf

    def _apply(self, p, group, update):
        if p.grad is None:
            return
        x = _local(p)
        x.mul_(1 - group["lr"] * group["weight_decay"])
        x.add_(update.view_as(x).to(x.dtype), alpha=-group["lr"])

    def _ns(self, mats, rows, cols):
        dtype = self.ns_dtype or (torch.bfloat16 if mats.is_cuda else torch.float32)
        return newton_schulz(mats, self.ns_steps, dtype=dtype).mul_(muon_scale(rows, cols))

    def _exchange(self, bk, send, out_splits, in_splits):
        """Start one all_to_all_single of a bucket; returns (received buffer, work or None)."""
        if not bk.exchange:  # nothing crosses ranks: the send order is the receive order
            return send, None
        recv = send.new_empty(sum(out_splits))
        work = dist.all_to_all_single(recv, send, out_splits, in_splits, group=bk.info.group, async_op=True)
        self.last_step_bytes += (sum(in_splits) - in_splits[bk.info.rank]) * send.element_size()
        if not self.overlap:
            work.wait()
            return recv, None
        return recv, work

    def _send_out(self, bk, params, updates):
        """Pack a sharded bucket's local matrices and start sending them to their owners."""
        if bk.info.size == 1:
            return None
        flat = torch.cat([updates[i].reshape(-1) for i in bk.members])
        dtype = self.ns_dtype or (torch.bfloat16 if flat.is_cuda else torch.float32)
        return self._exchange(bk, flat.to(dtype)[bk.send_index], bk.recv_splits, bk.send_splits)

    def _unsharded(self, bk, params, updates):
        """A bucket nobody shards: its matrices are views of the local tensors."""
        mats = torch.cat([to_matrices(updates[i], params[i][1]["granularity"], params[i][1]["head_dim"])
                          for i in bk.members])
        out, start = self._ns(mats, bk.rows, bk.cols), 0
        for i in bk.members:
            p, g = params[i]
            n = matrix_shape(tuple(p.shape), g["granularity"], g["head_dim"])[0]
            self._apply(p, g, from_matrices(out[start:start + n], tuple(p.shape), g["granularity"]))
            start += n

    def _muon_step(self):
        params, buckets = self._plan()
        if not params:
            return
        updates = [self._momentum(p, g) for p, g in params]
        self.last_step_bytes = 0
        returning = []
        outgoing = self._send_out(buckets[0], params, updates) if buckets else None
        for b, bk in enumerate(buckets):
            # Start the next bucket's exchange before this bucket's Newton-Schulz.
            arriving = outgoing
            outgoing = self._send_out(buckets[b + 1], params, updates) if b + 1 < len(buckets) else None
            if bk.info.size == 1:
                self._unsharded(bk, params, updates)
                continue
            recv, work = arriving
            if work is not None:
                work.wait()
            mats = recv.new_empty(bk.owned * bk.rows * bk.cols)
            mats[bk.recv_pos] = recv
            out = self._ns(mats.view(bk.owned, bk.rows, bk.cols), bk.rows, bk.cols).reshape(-1)
            returning.append((bk, self._exchange(bk, out[bk.recv_pos], bk.send_splits, bk.recv_splits)))
        for bk, (back, work) in returning:
            if work is not None:
                work.wait()
            flat = back.new_empty(bk.local_numel)
            flat[bk.send_index] = back
            for i, off in zip(bk.members, bk.local_offsets):
                self._apply(*params[i], flat[off:off + updates[i].numel()])

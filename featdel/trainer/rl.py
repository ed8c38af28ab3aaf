"""One Targeted RL update from a batch of trajectories: tensors, teacher, loss, step.

In: `Trajectory` records (k rollouts per task, grouped by `instance_id`), the model being
trained with its optimizer, an `RLConfig` and a `Teacher`. Out: one optimizer step and a dict
of metrics (the loss and its two terms, KL to the sampling policy and to the teacher, reward,
token and hint counts).

- Only the policy's own tokens train (`Trajectory.mask`); their sampling-time log-probabilities
  (`Turn.logprobs`) are the "old" policy of the clipped ratio.
- `broken` trajectories (the sandbox or grading failed, not the learner) are left out.
- Each hinted turn gets one teacher pass: the trajectory's tokens with that turn's hints
  inserted before its action (`insert_hint`), scored without gradient, and the teacher's logits
  at the turn's own tokens are gathered. Only those rows reach the distillation term, so a
  teacher pass never needs a `[batch, seq, vocab]` tensor and untargeted turns are untouched.
- The teacher is a plain (unsharded) model: `live` is the weights the rollouts were sampled
  with, `frozen` the initial weights, `ema` an exponential average updated after each step.
  Under FSDP the caller keeps that copy in sync (`Teacher.update`), so teacher passes are local
  to a rank and never a collective that ranks without hints would skip.
- Every rank runs exactly one forward, backward and optimizer step per call, even with nothing
  to learn from (a zero loss on one dummy token), because FSDP2's collectives must match across
  ranks; a caller whose ranks all have nothing skips the call (weight decay would still move).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import torch

from featdel.trainer.rl_loss import LossConfig, distill_loss, insert_hint, rl_loss

TEACHERS = ("live", "frozen", "ema")


@dataclass(frozen=True, kw_only=True, slots=True)
class RLConfig:
    loss: LossConfig = field(default_factory=LossConfig)
    hints: bool = True  # False: the trajectory objective alone
    teacher: str = "live"  # "live" | "frozen" | "ema"
    ema_decay: float = 0.99

    def __post_init__(self):
        if self.teacher not in TEACHERS:
            raise ValueError(f"teacher={self.teacher!r}: use one of {', '.join(TEACHERS)}")
        if not 0 <= self.ema_decay < 1:
            raise ValueError(f"ema_decay={self.ema_decay} must be in [0, 1)")


class Teacher:
    """The distillation teacher: the same architecture, no gradient, one of three weight sets."""

    def __init__(self, model, kind: str = "live", *, decay: float = 0.99, params: dict | None = None,
                 encode=None, codec=None):
        """`model`: a plain model (single process: the trained model itself; under FSDP: the
        rank's unsharded copy). `params`: full weights to start from (default: `model`'s).
        `codec`: the episode's codec, which frames the hints (a chat codec makes them a user
        message); `encode` alone: how hint text becomes tokens. Default: bytes."""
        if kind not in TEACHERS:
            raise ValueError(f"teacher={kind!r}: use one of {', '.join(TEACHERS)}")
        self.kind, self.decay, self.codec = kind, decay, codec
        self.encode = encode or (codec.encode if codec is not None else None)
        self.model = model if kind == "live" else copy.deepcopy(model).requires_grad_(False)
        if params is not None and kind != "live":
            self.model.load_state_dict(params, strict=False)

    def logits(self, ids: list[int]):
        """Logits `[len(ids), vocab]` of the teacher on one sequence."""
        device = next(self.model.parameters()).device
        with torch.no_grad():
            return self.model(torch.tensor([ids], dtype=torch.long, device=device))[0].float()

    def hinted(self, tokens: list[int], action_start: int, hints) -> tuple[list[int], list[int]]:
        """The teacher's context for one turn (`insert_hint`'s output): `hints` framed by the codec."""
        from featdel.agent.policy import hint_insertion

        if self.codec is not None:
            ids, at = hint_insertion(self.codec, tokens, action_start, hints)
        else:
            ids, at = [i for h in hints for i in h.ids(self.encode)], action_start
        return insert_hint(tokens, at, ids)

    def update(self, params: dict) -> None:
        """After an optimizer step, with the trained model's full weights by name: `ema` moves
        towards them; `live` follows the model it holds; `frozen` never changes."""
        if self.kind != "ema":
            return
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                p.lerp_(params[name].to(p.dtype), 1 - self.decay)


@dataclass(frozen=True, kw_only=True, slots=True)
class RLBatch:
    inputs: torch.Tensor  # long [B, T]
    targets: torch.Tensor  # long [B, T]
    mask: torch.Tensor  # bool [B, T]: target is a policy token
    old_logprobs: torch.Tensor  # float [B, T]
    rewards: torch.Tensor  # float [B]
    groups: torch.Tensor  # long [B]


def usable(trajectories) -> list:
    """The trajectories a loss can learn from: not broken, with at least one policy token."""
    return [t for t in trajectories if t.status != "broken" and len(t.tokens) > 1 and any(t.mask)]


def with_signal(trajectories, *, hints: bool = True) -> int:
    """How many usable trajectories carry a gradient: in a group (a task's rollouts) whose rewards
    differ, or hinted when the distillation term is on. With none on any rank the step is skipped:
    Sharded Muon would otherwise keep stepping at full size along its decaying momentum (the
    Newton-Schulz update is normalised), learning from nothing."""
    batch = usable(trajectories)
    rewards: dict[str, set[float]] = {}
    for t in batch:
        rewards.setdefault(t.instance_id, set()).add(float(t.reward))
    return sum(1 for t in batch if len(rewards[t.instance_id]) > 1 or (hints and t.hints))


def to_batch(trajectories) -> RLBatch:
    """Right-padded tensors over `trajectories` (groups numbered by first appearance of their task)."""
    if not trajectories:
        raise ValueError("no trajectories to batch")
    width = max(len(t.tokens) for t in trajectories) - 1
    shape = (len(trajectories), width)
    inputs, targets = torch.zeros(shape, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    mask, old = torch.zeros(shape, dtype=torch.bool), torch.zeros(shape)
    group_of: dict[str, int] = {}
    for row, t in enumerate(trajectories):
        n = len(t.tokens) - 1
        tokens = torch.tensor(t.tokens, dtype=torch.long)
        inputs[row, :n], targets[row, :n] = tokens[:-1], tokens[1:]
        mask[row, :n] = torch.tensor(t.mask[1:], dtype=torch.bool)
        for turn in t.turns:  # target index p - 1 predicts token p
            lo = turn.action_start - 1
            old[row, lo:lo + len(turn.logprobs)] = torch.tensor(turn.logprobs, dtype=torch.float32)
        group_of.setdefault(t.instance_id, len(group_of))
    return RLBatch(inputs=inputs, targets=targets, mask=mask, old_logprobs=old,
                   rewards=torch.tensor([float(t.reward) for t in trajectories]),
                   groups=torch.tensor([group_of[t.instance_id] for t in trajectories]))


def targeted_rows(trajectories, teacher: Teacher):
    """(batch rows, target columns, teacher logits `[N, vocab]`) of every hinted turn's tokens."""
    rows, cols, logits = [], [], []
    for row, t in enumerate(trajectories):
        by_turn: dict[int, list] = {}
        for h in t.hints:
            by_turn.setdefault(h.turn, []).append(h)
        turns = {turn.index: turn for turn in t.turns}
        for index, hints in sorted(by_turn.items()):
            turn = turns.get(index)
            if turn is None or not turn.action_ids:
                continue
            teacher_ids, where = teacher.hinted(t.tokens, turn.action_start, hints)
            scored = teacher.logits(teacher_ids[:-1])
            positions = range(turn.action_start, turn.action_start + len(turn.action_ids))
            rows += [row] * len(positions)
            cols += [p - 1 for p in positions]
            logits.append(scored[[where[p] - 1 for p in positions]])
    if not rows:
        return None
    return torch.tensor(rows), torch.tensor(cols), torch.cat(logits)


def rl_step(model, opt, trajectories, *, cfg: RLConfig = RLConfig(), teacher: Teacher | None = None) -> dict:
    """One forward, backward and optimizer step on this rank's trajectories; metrics out."""
    device = next(model.parameters()).device
    batch_trajs = usable(trajectories)
    hints = sum(len(t.hints) for t in trajectories)
    rewards = [float(t.reward) for t in trajectories if t.status != "broken"]
    metrics = {"trajectories": len(trajectories), "usable": len(batch_trajs), "hints": hints,
               "reward_mean": sum(rewards) / len(rewards) if rewards else 0.0}
    if not batch_trajs:  # keep the collectives in step with the other ranks
        dummy = model(torch.zeros((1, 1), dtype=torch.long, device=device))
        (dummy.float().sum() * 0.0).backward()
        opt.step()
        opt.zero_grad()
        return metrics | {"loss": 0.0, "policy": 0.0, "distill": 0.0, "kl_old": 0.0, "kl_teacher": 0.0,
                          "tokens": 0, "targeted_tokens": 0}
    b = to_batch(batch_trajs)
    mask = b.mask.to(device)
    targets = b.targets.to(device)
    logits = model(b.inputs.to(device))
    loss, parts = rl_loss(logits, targets, b.old_logprobs.to(device), mask, b.rewards.to(device),
                          b.groups.to(device), cfg=cfg.loss)
    distill = kl_teacher = torch.zeros((), device=device)
    targeted = 0
    if cfg.hints and teacher is not None:
        found = targeted_rows(batch_trajs, teacher)
        if found is not None:
            rows, cols, t_logits = (x.to(device) for x in found)
            student = logits[rows, cols]
            distill = distill_loss(student, t_logits, targets[rows, cols], torch.ones_like(rows, dtype=torch.bool),
                                   cfg.loss)
            loss = loss + cfg.loss.distill_weight * distill
            kl_teacher = _kl(student.detach(), t_logits)
            targeted = int(rows.numel())
    loss.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        new = torch.log_softmax(logits.detach().float(), -1).gather(-1, targets[..., None]).squeeze(-1)
        kl_old = ((b.old_logprobs.to(device) - new) * mask).sum() / mask.sum().clamp(min=1)
    return metrics | {"loss": loss.detach().item(), "policy": float(parts["policy"]), "distill": float(distill.detach()),
                      "kl_old": kl_old.item(), "kl_teacher": float(kl_teacher), "tokens": int(mask.sum()),
                      "targeted_tokens": targeted}


def _kl(student_logits, teacher_logits):
    """Mean KL(student || teacher) over rows, full vocabulary (a metric, not a loss)."""
    s = torch.log_softmax(student_logits.float(), -1)
    t = torch.log_softmax(teacher_logits.float(), -1)
    return (s.exp() * (s - t)).sum(-1).mean()

"""The Targeted RL objective: a trajectory policy-gradient term plus targeted self-distillation.

In: for a batch of rollouts (k per task), the student's logits at the positions that predicted
each sampled token, the sampled ids, their log-probabilities at sampling time, a mask of the
policy's own tokens, each rollout's reward and task group; and for hinted turns, the teacher's
logits at the same tokens (the same model without gradient, run on the context with the hint
inserted: `insert_hint` gives the teacher's input and where each student token lands in it) and
a mask of the targeted turn's tokens. Out: the loss and its parts.

- Policy term (GRPO-style): advantages normalised within each task's group of rollouts, the
  same for every token of a rollout; PPO ratio clipping with separate low and high bounds;
  token-level aggregation (every policy token of the batch weighs the same, DAPO).
- Distillation term, on targeted tokens only, with its own normaliser and weight. Two
  estimators: `sampled` uses the sampled-token reverse KL, log p_teacher(y) - log p_student(y),
  as a per-token advantage (on-policy distillation); `full` and `topk` compute KL(student ||
  teacher) over the whole vocabulary or the student's top-k tokens.
With an empty hint the teacher sees the student's context, so the term is exactly zero.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, kw_only=True, slots=True)
class LossConfig:
    clip_low: float = 0.2  # ratio floor 1 - clip_low
    clip_high: float = 0.28  # ratio ceiling 1 + clip_high (DAPO's "clip higher")
    normalise_std: bool = True  # divide advantages by the group's std (False: Dr. GRPO)
    distill: str = "sampled"  # "sampled" | "full" | "topk"
    top_k: int = 20
    distill_weight: float = 1.0
    eps: float = 1e-6

    def __post_init__(self):
        if self.distill not in ("sampled", "full", "topk"):
            raise ValueError(f"distill={self.distill!r}: use sampled, full or topk")
        if not (0 <= self.clip_low < 1 and self.clip_high >= 0):
            raise ValueError("need 0 <= clip_low < 1 and clip_high >= 0")


def insert_hint(tokens: list[int], at: int, hint: list[int]) -> tuple[list[int], list[int]]:
    """The teacher's input (`hint` inserted before position `at`) and, for every student
    position, the teacher position holding the same token."""
    if not 0 <= at <= len(tokens):
        raise ValueError(f"hint position {at} is outside a sequence of {len(tokens)} tokens")
    teacher = tokens[:at] + hint + tokens[at:]
    return teacher, [p if p < at else p + len(hint) for p in range(len(tokens))]


def group_advantages(rewards, groups, *, normalise_std: bool = True, eps: float = 1e-6):
    """Each rollout's reward minus its group's mean (over its group's std when asked): `[B]`."""
    rewards = rewards.float()
    out = torch.zeros_like(rewards)
    for g in groups.unique():
        sel = groups == g
        centred = rewards[sel] - rewards[sel].mean()
        if normalise_std and sel.sum() > 1:
            centred = centred / (rewards[sel].std(unbiased=False) + eps)
        out[sel] = centred
    return out


def _masked_mean(values, mask):
    weights = mask.to(values.dtype)
    return (values * weights).sum() / weights.sum().clamp(min=1.0)


def policy_loss(logprobs, old_logprobs, advantages, mask, cfg: LossConfig):
    """Clipped surrogate per token (advantages `[B, T]`), averaged over every masked token."""
    ratio = torch.exp(logprobs - old_logprobs)
    clipped = ratio.clamp(1 - cfg.clip_low, 1 + cfg.clip_high)
    per_token = -torch.minimum(ratio * advantages, clipped * advantages)
    return _masked_mean(per_token, mask)


def distill_loss(student_logits, teacher_logits, tokens, target_mask, cfg: LossConfig):
    """The distillation term over the targeted tokens (teacher logits carry no gradient)."""
    student = torch.log_softmax(student_logits.float(), dim=-1)
    teacher = torch.log_softmax(teacher_logits.detach().float(), dim=-1)
    if cfg.distill == "sampled":
        s = student.gather(-1, tokens[..., None]).squeeze(-1)
        t = teacher.gather(-1, tokens[..., None]).squeeze(-1)
        advantage = (t - s).detach()  # > 0 where the teacher likes the sampled token more
        return _masked_mean(-advantage * s, target_mask)
    if cfg.distill == "topk":
        keep = torch.zeros_like(student, dtype=torch.bool).scatter(-1, student.topk(cfg.top_k, dim=-1).indices, True)
    else:
        keep = torch.ones_like(student, dtype=torch.bool)
    kl = (student.exp() * (student - teacher) * keep).sum(-1)
    return _masked_mean(kl, target_mask)


def rl_loss(student_logits, tokens, old_logprobs, mask, rewards, groups, *, teacher_logits=None,
            target_mask=None, cfg: LossConfig = LossConfig()):
    """(total loss, parts) for one batch; see the module docstring for the shapes."""
    logprobs = torch.log_softmax(student_logits.float(), dim=-1).gather(-1, tokens[..., None]).squeeze(-1)
    advantages = group_advantages(rewards, groups, normalise_std=cfg.normalise_std, eps=cfg.eps)
    pg = policy_loss(logprobs, old_logprobs, advantages[:, None].expand_as(logprobs), mask, cfg)
    parts = {"policy": pg.detach(), "distill": torch.zeros(()), "targeted_tokens": torch.zeros(())}
    total = pg
    if teacher_logits is not None and target_mask is not None and target_mask.any():
        dl = distill_loss(student_logits, teacher_logits, tokens, target_mask & mask.bool(), cfg)
        total = total + cfg.distill_weight * dl
        parts.update(distill=dl.detach(), targeted_tokens=target_mask.sum())
    return total, parts

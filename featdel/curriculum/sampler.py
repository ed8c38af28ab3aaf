"""Which tasks to attempt next: weighted by learnability, unseen ones explored, settled ones retired.

In: `TaskStats` (Beta posteriors). Out: instance ids, one per chosen task, in draw order.

- Weight: E[p(1-p)] under the task's posterior, the expected learning signal of one attempt
  (largest, 1/4, for a task solved half the time; near 0 once a task is always or never solved).
- Exploration: an unseen task has weight `explore` (default 1/4, the largest a seen task can
  have), so new tasks are tried soon instead of waiting behind well-known ones.
- Retirement: a task is left out once the evidence is strong that it is always solved
  (P(p >= 1 - margin) >= confidence) or never solved (P(p <= margin) >= confidence). With the
  defaults (margin 0.2, confidence 0.95) that takes 13 straight failures or successes.
- `band`: only tasks whose posterior mean lies in [lo, hi].
Draws are without replacement, from `numpy.random.default_rng(seed)`: the same store and seed
give the same ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from featdel.curriculum.posterior import TaskStats


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleOptions:
    n: int
    seed: int = 0
    band: tuple[float, float] = (0.0, 1.0)
    explore: float = 0.25
    retire_margin: float = 0.2
    retire_confidence: float = 0.95
    uniform: bool = False  # ignore learnability (the baseline the bench compares against)

    def __post_init__(self) -> None:
        lo, hi = self.band
        if not 0 <= lo <= hi <= 1:
            raise ValueError(f"--band {lo} {hi}: need 0 <= LO <= HI <= 1")
        if self.n < 1:
            raise ValueError(f"-n {self.n}: need at least 1")


def retired(s: TaskStats, opts: SampleOptions) -> str:
    """'always', 'never' or '' (still worth attempting)."""
    if not s.trials:
        return ""
    if s.cdf(opts.retire_margin) >= opts.retire_confidence:
        return "never"
    if 1 - s.cdf(1 - opts.retire_margin) >= opts.retire_confidence:
        return "always"
    return ""


def weight(s: TaskStats, opts: SampleOptions) -> float:
    if opts.uniform:
        return 1.0
    return opts.explore if not s.trials else s.learnability()


def sample(stats: list[TaskStats], opts: SampleOptions) -> list[str]:
    """Up to `opts.n` distinct instance ids (fewer when fewer tasks are eligible)."""
    lo, hi = opts.band
    pool = sorted((s for s in stats if lo <= s.mean <= hi and (opts.uniform or not retired(s, opts))),
                  key=lambda s: s.instance_id)
    if not pool:
        return []
    w = np.array([weight(s, opts) for s in pool], dtype=float)
    w = np.maximum(w, 1e-12)
    rng = np.random.default_rng(opts.seed)
    picks = rng.choice(len(pool), size=min(opts.n, len(pool)), replace=False, p=w / w.sum())
    return [pool[i].instance_id for i in picks]

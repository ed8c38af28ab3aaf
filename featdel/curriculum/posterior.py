"""Per-task Beta posteriors of the pass rate, and summaries per strategy, repo and difficulty bucket.

In: the attempts store (`store.outcomes`) and a packaged run's task shards (for strategy, repo
and the difficulty struct). Out: `TaskStats` per task and summary tables; `plot` draws the
pass-rate distribution and predicted against observed pass rate (matplotlib, an optional extra).

The prior is Beta(1, 1): a task nobody has tried has mean 0.5 and the widest interval. A reward
in [0, 1] counts as that fraction of a success, so the trainer may record partial rewards.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from featdel.core.errors import FeatdelError
from featdel.core.store import Outcome

_GRID = np.linspace(0.0, 1.0, 2001)
BUCKETS = ((1, 9), (10, 29), (30, 99), (100, 10**9))


@dataclass(frozen=True, kw_only=True, slots=True)
class TaskStats:
    instance_id: str
    repo: str
    strategy: str
    difficulty: dict
    successes: float = 0.0
    trials: int = 0
    broken: int = 0

    @property
    def alpha(self) -> float:
        return 1.0 + self.successes

    @property
    def beta(self) -> float:
        return 1.0 + self.trials - self.successes

    @property
    def mean(self) -> float:
        return self.alpha / (self.alpha + self.beta)

    @property
    def observed(self) -> float | None:
        return self.successes / self.trials if self.trials else None

    def learnability(self) -> float:
        """E[p(1-p)] under Beta(a, b): ab / ((a+b)(a+b+1)); 1/6 for an unseen task, 1/4 at most."""
        a, b = self.alpha, self.beta
        return a * b / ((a + b) * (a + b + 1))

    def cdf(self, x: float) -> float:
        """P(p <= x) under the posterior (numerical, exact enough for thresholds)."""
        return float(np.interp(x, _GRID, _beta_cdf(self.alpha, self.beta)))

    def interval(self, mass: float = 0.9) -> tuple[float, float]:
        cdf = _beta_cdf(self.alpha, self.beta)
        lo, hi = (1 - mass) / 2, 1 - (1 - mass) / 2
        return float(np.interp(lo, cdf, _GRID)), float(np.interp(hi, cdf, _GRID))


def _beta_cdf(a: float, b: float) -> np.ndarray:
    inner = _GRID[1:-1]
    logpdf = (a - 1) * np.log(inner) + (b - 1) * np.log1p(-inner) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    pdf = np.concatenate([[0.0], np.exp(logpdf), [0.0]])
    cdf = np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2) * (_GRID[1] - _GRID[0])])
    return cdf / cdf[-1]


def bucket(difficulty: dict) -> str:
    lines = int(difficulty.get("deleted_lines") or 0)
    for lo, hi in BUCKETS:
        if lo <= lines <= hi:
            return f"{lo}+ lines" if hi >= 10**9 else f"{lo}-{hi} lines"
    return "0 lines"


def task_rows(run_dir: Path) -> list[dict]:
    """The packaged tasks' rows (instance_id, repo, strategy, difficulty, ...)."""
    from featdel.core.rundir import RunDir
    from featdel.core.shards import read_tasks

    RunDir(run_dir).need(RunDir(run_dir).tasks_dir, f"run `featdel package {run_dir}` first")
    return read_tasks(run_dir).drop_columns(["patch", "deletion_patch", "test_patch", "problem_statement"]).to_pylist()


def task_stats(rows: list[dict], outcomes: dict[str, Outcome]) -> list[TaskStats]:
    """One `TaskStats` per packaged task; attempts on ids not in the run are ignored."""
    out = []
    for row in rows:
        o = outcomes.get(row["instance_id"])
        out.append(TaskStats(instance_id=row["instance_id"], repo=row["repo"], strategy=row["strategy"],
                             difficulty=dict(row["difficulty"] or {}), successes=o.successes if o else 0.0,
                             trials=o.trials if o else 0, broken=o.broken if o else 0))
    return out


def summarise(stats: list[TaskStats], key: Callable[[TaskStats], str]) -> list[dict]:
    """Rows of: group, tasks, tried, attempts, pass rate (pooled), informative (0 < observed < 1)."""
    groups: dict[str, list[TaskStats]] = {}
    for s in stats:
        groups.setdefault(key(s), []).append(s)
    rows = []
    for name, members in sorted(groups.items()):
        trials = sum(m.trials for m in members)
        wins = sum(m.successes for m in members)
        tried = [m for m in members if m.trials]
        rows.append({"group": name, "tasks": len(members), "tried": len(tried), "attempts": trials,
                     "broken": sum(m.broken for m in members),
                     "pass rate": round(wins / trials, 3) if trials else None,
                     "informative": sum(1 for m in tried if 0 < m.observed < 1)})
    return rows


SUMMARIES: dict[str, Callable[[TaskStats], str]] = {
    "strategy": lambda s: s.strategy,
    "repo": lambda s: s.repo,
    "difficulty": lambda s: bucket(s.difficulty),
}


def plot(stats: list[TaskStats], predicted: dict[str, float] | None, path: Path) -> Path:
    """Pass-rate histogram (posterior means of tried tasks) and predicted against observed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FeatdelError("--plot needs matplotlib: pip install 'featdel[plot]'") from None
    tried = [s for s in stats if s.trials]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.hist([s.observed for s in tried], bins=10, range=(0, 1))
    left.set(xlabel="observed pass rate", ylabel="tasks", title=f"{len(tried)} tried tasks")
    if predicted:
        pairs = [(predicted[s.instance_id], s.observed) for s in tried if s.instance_id in predicted]
        right.scatter([p for p, _ in pairs], [o for _, o in pairs], s=12)
    right.plot([0, 1], [0, 1], color="grey", lw=1)
    right.set(xlabel="predicted pass rate", ylabel="observed pass rate", title="difficulty model")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

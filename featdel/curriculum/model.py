"""A difficulty model: a task's pass rate for a learner from its difficulty features.

In: task rows (the `difficulty` struct and `strategy` of the task shards) and a learner's
attempts grouped by task and round. Out: `DifficultyModel.predict`, the pass rate of a task
(real or planned) at a round, and `Calibration` (Brier score per attempt, and the share of tasks
whose predicted pass rate is within 0.15 of the observed one), out of fold when there are enough
tasks.

A logistic regression written with numpy (Newton steps with an L2 penalty): a dozen features
and a few thousand attempts need nothing bigger, and it keeps scikit-learn out of the
dependencies. Features are logs of the size counts, similarity, whether docstrings were stripped
and tests hidden, the strategy (one-hot), and the round: a learner's skill grows, so the round's
coefficient carries the trend and `predict(..., round=next)` extrapolates it one round ahead.
Only the last `window` rounds are fitted, to stay local to the learner's current skill.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

NUMERIC = ("deleted_lines", "deleted_symbols", "files", "cyclomatic", "fail_to_pass", "references")


@dataclass(frozen=True, kw_only=True, slots=True)
class Observation:
    """Attempts on one task in one round."""

    difficulty: dict
    strategy: str
    round: int
    successes: float
    trials: int
    instance_id: str = ""


def _raw(difficulty: dict, strategy: str, rnd: float, strategies: tuple[str, ...]) -> list[float]:
    d = difficulty
    row = [math.log1p(max(0.0, float(d.get(k) or 0))) for k in NUMERIC]
    row += [float(d.get("similarity") or 0.0), 0.0 if d.get("docstrings_kept", True) else 1.0,
            0.0 if d.get("tests_visible", True) else 1.0, float(rnd)]
    row += [1.0 if strategy == s else 0.0 for s in strategies]
    return row


@dataclass(frozen=True, kw_only=True, slots=True)
class DifficultyModel:
    strategies: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray  # intercept first
    last_round: int

    def logit(self, difficulty: dict, strategy: str, *, round: int | None = None) -> float:
        rnd = self.last_round + 1 if round is None else round
        x = (np.array(_raw(difficulty, strategy, rnd, self.strategies)) - self.mean) / self.scale
        return float(self.coef[0] + x @ self.coef[1:])

    def predict(self, difficulty: dict, strategy: str, *, round: int | None = None) -> float:
        """Pass rate at `round` (default: the round after the last one fitted)."""
        return 1.0 / (1.0 + math.exp(-self.logit(difficulty, strategy, round=round)))


def fit(observations: list[Observation], *, l2: float = 10.0, window: int | None = 5) -> DifficultyModel:
    obs = [o for o in observations if o.trials > 0]
    if not obs:
        raise ValueError("no graded attempts to fit the difficulty model on")
    last = max(o.round for o in obs)
    if window:
        obs = [o for o in obs if o.round > last - window]
    strategies = tuple(sorted({o.strategy for o in obs}))
    X = np.array([_raw(o.difficulty, o.strategy, o.round, strategies) for o in obs])
    mean, scale = X.mean(axis=0), X.std(axis=0)
    scale[scale == 0] = 1.0
    Z = np.hstack([np.ones((len(obs), 1)), (X - mean) / scale])
    n = np.array([o.trials for o in obs], dtype=float)
    y = np.array([o.successes for o in obs], dtype=float) / n
    penalty = np.full(Z.shape[1], l2)
    penalty[0] = 0.0
    coef = np.zeros(Z.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-(Z @ coef)))
        grad = Z.T @ (n * (p - y)) + penalty * coef
        hess = (Z * (n * p * (1 - p))[:, None]).T @ Z + np.diag(penalty) + 1e-9 * np.eye(Z.shape[1])
        step = np.linalg.solve(hess, grad)
        coef -= step
        if np.abs(step).max() < 1e-8:
            break
    return DifficultyModel(strategies=strategies, mean=mean, scale=scale, coef=coef, last_round=last)


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    brier: float  # mean over attempts of (predicted - outcome)^2
    within: float  # share of tasks whose predicted pass rate is within `tolerance` of the observed
    tolerance: float
    tasks: int
    attempts: int
    out_of_fold: bool


def calibrate(observations: list[Observation], *, folds: int = 5, tolerance: float = 0.15, l2: float = 10.0,
              window: int | None = 5, seed: int = 0) -> Calibration:
    """Brier score and the within-tolerance share, each task predicted by a model fitted without
    it (k folds over tasks) when there are at least 2*folds tasks, else in sample."""
    last = max(o.round for o in observations if o.trials)
    obs = [o for o in observations if o.trials and (not window or o.round > last - window)]
    ids = sorted({o.instance_id for o in obs})
    out_of_fold = len(ids) >= 2 * folds
    order = np.random.default_rng(seed).permutation(len(ids))
    fold_of = {ids[i]: k % folds for k, i in enumerate(order)} if out_of_fold else {i: 0 for i in ids}
    predicted: dict[int, float] = {}
    for k in range(folds if out_of_fold else 1):
        train = [o for o in obs if fold_of[o.instance_id] != k] if out_of_fold else obs
        model = fit(train, l2=l2, window=None)
        for j, o in enumerate(obs):
            if fold_of[o.instance_id] == k:
                predicted[j] = model.predict(o.difficulty, o.strategy, round=o.round)
    sq, attempts = 0.0, 0
    per_task: dict[str, list[float]] = {}
    for j, o in enumerate(obs):
        p = predicted[j]
        sq += o.successes * (1 - p) ** 2 + (o.trials - o.successes) * p**2
        attempts += o.trials
        acc = per_task.setdefault(o.instance_id, [0.0, 0.0, 0.0])
        acc[0] += p * o.trials
        acc[1] += o.successes
        acc[2] += o.trials
    close = sum(1 for p, s, n in per_task.values() if abs(p / n - s / n) <= tolerance)
    return Calibration(brier=sq / attempts, within=close / len(per_task), tolerance=tolerance, tasks=len(per_task),
                       attempts=attempts, out_of_fold=out_of_fold)


def observations(rows: list[dict], grouped: list[tuple[str, int, float, int]]) -> list[Observation]:
    """Join task rows (instance_id, strategy, difficulty) with `store.by_round` groups."""
    tasks = {r["instance_id"]: r for r in rows}
    return [Observation(instance_id=iid, difficulty=dict(tasks[iid]["difficulty"] or {}),
                        strategy=tasks[iid]["strategy"], round=int(rnd), successes=float(s), trials=int(n))
            for iid, rnd, s, n in grouped if iid in tasks and n]

"""A simulated learner of known skill, to show steering and learnability sampling at work.

In: real task rows (their `difficulty` struct and `strategy`) and an attempts file. Out: per
round, the pass rate of that round's tasks (`steering_run`) or the share of informative attempt
groups (`sampling_run`).

The learner solves a task with probability logistic(skill - difficulty), where difficulty is a
fixed, hidden weighting of the real difficulty features (`TRUE_WEIGHTS`) and skill grows by
`growth` each round. Everything else is the real machinery: attempts go to a DuckDB file through
`store.add`, the model is `model.fit` on them, knobs come from `steer.choose`, draws from
`sampler.sample`. Candidates are the real tasks; their knobs are docstrings kept or stripped,
tests visible or hidden, and combining with one or two other tasks (features summed, strategy
`combine`), which is what those knobs do to the features of a real deletion.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from featdel.core import store
from featdel.curriculum import model as dm
from featdel.curriculum import posterior, sampler, steer

TRUE_WEIGHTS = {"deleted_lines": 0.6, "cyclomatic": 0.5, "fail_to_pass": 0.2, "files": 0.5}
STRIPPED, HIDDEN = 0.9, 0.9


def true_difficulty(d: dict) -> float:
    size = sum(w * math.log1p(float(d.get(k) or 0)) for k, w in TRUE_WEIGHTS.items())
    return size + (0.0 if d.get("docstrings_kept", True) else STRIPPED) + (0.0 if d.get("tests_visible", True) else HIDDEN)


@dataclass(frozen=True, kw_only=True, slots=True)
class Learner:
    skill0: float
    growth: float = 0.3

    def p(self, difficulty: dict, rnd: int) -> float:
        return 1.0 / (1.0 + math.exp(-(self.skill0 + self.growth * rnd - true_difficulty(difficulty))))


def options_for(rows: list[dict], rng: random.Random, *, max_combined: int = 3) -> dict[str, list]:
    """Per real task: every knob setting and the features it gives."""
    out = {}
    for row in rows:
        others = [r for r in rows if r["instance_id"] != row["instance_id"]]
        opts = []
        for k in range(1, max_combined + 1):
            parts = [row["difficulty"]] + [r["difficulty"] for r in rng.sample(others, min(k - 1, len(others)))]
            base = dict(row["difficulty"]) if k == 1 else steer.combined(parts)
            for knobs in steer.knob_space([row["strategy"] if k == 1 else "combine"]):
                knobs = steer.Knobs(strategy=knobs.strategy, docstrings_kept=knobs.docstrings_kept,
                                    tests_visible=knobs.tests_visible, combined=k)
                opts.append((knobs, steer.with_knobs(base, knobs)))
        out[row["instance_id"]] = opts
    return out


@dataclass(kw_only=True, slots=True)
class RoundResult:
    round: int
    tasks: int
    pass_rate: float  # observed, over every attempt on the round's new tasks
    expected: float  # mean true probability
    predicted: float | None = None
    difficulty: float = 0.0  # mean true difficulty of the round's tasks
    knobs: dict = field(default_factory=dict)


def steering_run(rows: list[dict], db: Path, *, steer_on: bool, target: float = 0.5, rounds: int = 6,
                 tasks_per_round: int = 80, attempts: int = 16, learner: Learner | None = None,
                 explore_rounds: int = 3, seed: int = 0,
                 tasks_out: dict | None = None) -> list[RoundResult]:
    """Each round: generate tasks (steered toward `target`, or with default knobs), let the
    learner attempt each `attempts` times, record, refit. The first `explore_rounds` rounds use
    random knobs: the model needs knob variety, and rounds to see the learner's trend (closed-loop
    data alone cannot tell a harder knob from a better learner).
    `tasks_out`, when given, receives every generated task's row (instance_id, strategy, difficulty)."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    if learner is None:  # default knobs start at the target
        mean_d = float(np.mean([true_difficulty(r["difficulty"]) for r in rows]))
        learner = Learner(skill0=mean_d + math.log(target / (1 - target)))
    name = "sim-steered" if steer_on else "sim-default"
    made: dict[str, dict] = {} if tasks_out is None else tasks_out
    out = []
    for rnd in range(rounds):
        options = options_for(rows, rng)
        keys = sorted(options)
        fitted = None
        if steer_on and rnd >= explore_rounds:
            obs = dm.observations(list(made.values()), store.by_round(db, learner=name))
            fitted = dm.fit(obs, window=None)
        picks = []
        while len(picks) < tasks_per_round:
            batch = {f"{k}#{len(picks)}": options[k] for k in rng.sample(keys, min(len(keys), tasks_per_round))}
            if fitted is not None:
                chosen = steer.choose(batch, fitted, target, round=rnd, seed=rng.randrange(1 << 30))
                picks += chosen[: max(1, len(chosen) // 2)]
            elif steer_on:  # exploration rounds: random knobs
                picks += [steer.Choice(key=k, knobs=o[0], difficulty=o[1], predicted=float("nan"))
                          for k, opts in batch.items() for o in [rng.choice(opts)]]
            else:
                picks += [steer.Choice(key=k, knobs=opts[0][0], difficulty=opts[0][1], predicted=float("nan"))
                          for k, opts in batch.items()]
        picks = picks[:tasks_per_round]
        recorded, wins, expected = [], 0, 0.0
        for i, c in enumerate(picks):
            iid = f"{name}-r{rnd}-{i}"
            made[iid] = {"instance_id": iid, "difficulty": c.difficulty, "strategy": c.knobs.strategy}
            p = learner.p(c.difficulty, rnd)
            expected += p / len(picks)
            for a in range(attempts):
                ok = bool(nrng.random() < p)
                wins += ok
                recorded.append(store.Attempt(instance_id=iid, learner=name, round=rnd, reward=float(ok),
                                              status="resolved" if ok else "unresolved", attempt_id=f"{iid}/{a}"))
        store.add(db, recorded)
        predicted = [c.predicted for c in picks if not math.isnan(c.predicted)]
        out.append(RoundResult(round=rnd, tasks=len(picks), pass_rate=wins / len(recorded), expected=expected,
                               predicted=float(np.mean(predicted)) if predicted else None,
                               difficulty=float(np.mean([true_difficulty(c.difficulty) for c in picks])),
                               knobs={"stripped": sum(not c.knobs.docstrings_kept for c in picks),
                                      "hidden": sum(not c.knobs.tests_visible for c in picks),
                                      "combined": sum(c.knobs.combined > 1 for c in picks)}))
    return out


def sampling_run(rows: list[dict], db: Path, *, uniform: bool, rounds: int = 12, per_round: int = 64,
                 group: int = 8, learner: Learner | None = None, seed: int = 0) -> list[float]:
    """A fixed pool (every knob setting of every real task); each round `per_round` tasks are
    drawn (learnability or uniform) and attempted `group` times (a GRPO group). By default the
    learner starts able to solve 70% of the pool more often than not, and grows slowly. Returns, per round, the share
    of drawn tasks whose group had both passes and failures (informative for RL)."""
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    pool = []
    for key, opts in options_for(rows, rng).items():
        for j, (knobs, d) in enumerate(opts):
            pool.append({"instance_id": f"{key}#{j}", "repo": "sim", "strategy": knobs.strategy, "difficulty": d})
    if learner is None:
        ds = sorted(true_difficulty(r["difficulty"]) for r in pool)
        learner = Learner(skill0=ds[int(len(ds) * 0.7)], growth=0.1)  # most of the pool easy, and easier
    by_id = {r["instance_id"]: r for r in pool}
    name = "sim-uniform" if uniform else "sim-learnability"
    shares = []
    for rnd in range(rounds):
        outcomes = store.outcomes(db, learner=name) if db.exists() else {}
        stats = posterior.task_stats(pool, outcomes)
        ids = sampler.sample(stats, sampler.SampleOptions(n=per_round, seed=seed * 1000 + rnd, uniform=uniform))
        recorded, informative = [], 0
        for iid in ids:
            p = learner.p(by_id[iid]["difficulty"], rnd)
            wins = int((nrng.random(group) < p).sum())
            informative += 0 < wins < group
            recorded += [store.Attempt(instance_id=iid, learner=name, round=rnd, reward=float(a < wins),
                                       status="resolved" if a < wins else "unresolved", attempt_id=f"{iid}/{rnd}/{a}")
                         for a in range(group)]
        store.add(db, recorded)
        shares.append(informative / len(ids))
    return shares

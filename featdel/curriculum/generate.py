"""`featdel run --target-pass-rate P --learner NAME`: the delete stage, steered by a learner's
difficulty model.

In: a mined run directory, the learner's fitted model, a target pass rate. Out: a
`SteeredPlanner` that the delete stage (featdel.pipeline.delete) takes as its plan, so deletions
land in `deletions.jsonl` as `featdel delete` writes them, and per deletion the chosen knobs and
the predicted pass rate in `RUN_DIR/steering.jsonl` (`Steering`), which `package` stores in each
task's `steering` column (and uses for the tests-visible knob).

Per mined repository: every candidate gets every knob setting open to it (each strategy that
fits it, docstrings kept or stripped, tests visible or hidden); its features are estimated
(`steer.estimate`) and the setting whose predicted pass rate is nearest the target is kept.
Candidates are then deleted nearest first by the delete stage's one loop, until
`max_candidates` were made or rolled back. Combined deletions are made after
verification by `run`'s combine step (`featdel.pipeline.delete.combine_all`); `annotate_combined`
records their knobs and the pass rate predicted from their parts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from featdel.core.records import Candidate, RepoRecord, Steering
from featdel.curriculum import steer
from featdel.curriculum.model import DifficultyModel
from featdel.pipeline.delete import Attempt


@dataclass(frozen=True, kw_only=True)
class SteeredPlanner:
    """A `featdel.pipeline.delete.Planner`: per candidate, every knob setting open to it, and the
    setting whose predicted pass rate for the learner is nearest the target, nearest first."""

    model: DifficultyModel
    target: float
    learner: str
    strategies: list[str]
    max_candidates: int
    seed: int = 0
    hide_tests: bool = True  # tests hidden is one of the knobs

    @property
    def options(self) -> dict:
        return {"strategies": self.strategies, "max_candidates": self.max_candidates, "seed": self.seed,
                "target_pass_rate": self.target, "learner": self.learner}

    def __call__(self, record: RepoRecord, original: Path, pool: list[Candidate]) -> list[Attempt]:
        from featdel.deletion import STRATEGIES

        names = [n for n in self.strategies if n != "combine"]  # combined after verification
        counts = steer.identifier_counts(original)
        typical = steer.typical_similarity(self.model)
        by_key = {f"{c.path}::{c.qualname}::{c.kind}": c for c in pool}
        plans = {}
        for key, cand in by_key.items():
            fitting = [n for n in names if STRATEGIES[n].fits(cand)]
            base = steer.estimate(cand, original, counts, typical)
            plans[key] = [(k, steer.with_knobs(base, k)) for k in steer.knob_space(fitting, tests=self.hide_tests)]
        out = []
        for choice in steer.choose(plans, self.model, self.target, seed=self.seed):
            knobs = choice.knobs
            steering = Steering(deletion_id="", learner=self.learner, target_pass_rate=self.target,
                                predicted_pass_rate=round(choice.predicted, 4), strategy=knobs.strategy,
                                docstrings_kept=knobs.docstrings_kept, tests_visible=knobs.tests_visible,
                                combined=knobs.combined, estimate=choice.difficulty)
            out.append(Attempt(candidate=by_key[choice.key], strategy=knobs.strategy,
                               keep_docstrings=knobs.docstrings_kept, steering=steering))
        return out


def annotate_combined(run_dir: Path, model: DifficultyModel, *, target: float, learner: str) -> int:
    """Steering rows for `combine` deletions (made by `run`'s combine step from verified tasks)
    whose parts were steered: knobs, and the pass rate predicted from the parts' summed
    features. Returns how many rows were added."""
    from featdel.core.rundir import RunDir

    rd = RunDir(run_dir)
    steering = rd.steering()
    added = 0
    for d in rd.deletions():
        parts = [steering.get(p) for p in d.parts]
        if d.deletion_id in steering or not parts or not all(p and p.estimate for p in parts):
            continue
        knobs = steer.Knobs(strategy="combine", docstrings_kept=all(p.docstrings_kept for p in parts),
                            tests_visible=all(p.tests_visible for p in parts), combined=len(parts))
        feats = steer.with_knobs(steer.combined([p.estimate for p in parts]), knobs)
        rd.add_steering(Steering(deletion_id=d.deletion_id, learner=learner, target_pass_rate=target,
                                 predicted_pass_rate=round(model.predict(feats, "combine"), 4), strategy="combine",
                                 docstrings_kept=knobs.docstrings_kept, tests_visible=knobs.tests_visible,
                                 combined=knobs.combined, estimate=feats))
        added += 1
    return added


def history_model(history: list[Path], learner: str) -> DifficultyModel:
    """The learner's difficulty model, fitted on its attempts in each run's curriculum.duckdb
    against that run's packaged tasks."""
    from featdel.core import store
    from featdel.core.errors import FeatdelError
    from featdel.curriculum import model, posterior

    obs = []
    for run in history:
        db = store.default_path(run)
        if db.exists() and (Path(run) / "tasks").is_dir():
            obs += model.observations(posterior.task_rows(run), store.by_round(db, learner=learner))
    if len({o.instance_id for o in obs}) < 2:
        where = ", ".join(str(h) for h in history)
        raise FeatdelError(f"--target-pass-rate needs attempts of learner {learner!r} on at least two tasks in "
                           f"{where}: grade some (`featdel evaluate`), record them (`featdel curriculum record "
                           f"RUN RESULTS --learner {learner}`), and name RUN with --history")
    return model.fit(obs)


def steered_planner(*, learner: str | None, target: float, history: list[Path], strategies: list[str] | None,
                    max_candidates: int, seed: int) -> SteeredPlanner:
    """The delete stage's plan for `featdel run --target-pass-rate`: the learner's model fitted
    on its recorded attempts in `history`."""
    from featdel.core.errors import FeatdelError
    from featdel.deletion import STRATEGIES

    if not learner:
        raise FeatdelError("--target-pass-rate needs --learner NAME (whose attempts fit the difficulty model)")
    return SteeredPlanner(model=history_model(history, learner), target=target, learner=learner,
                          strategies=strategies or list(STRATEGIES), max_candidates=max_candidates, seed=seed)

"""`featdel run --target-pass-rate P --learner NAME`: the delete stage, steered by a learner's
difficulty model.

In: a mined run directory, the learner's fitted model, a target pass rate. Out: deletions in
`deletions.jsonl` as `featdel delete` writes them, and per deletion the chosen knobs and the
predicted pass rate in `RUN_DIR/steering.jsonl`, which `package` stores in each task's
`steering` column (and uses for the tests-visible knob).

Per mined repository: every candidate gets every knob setting open to it (each strategy that
fits it, docstrings kept or stripped, tests visible or hidden); its features are estimated
(`steer.estimate`) and the setting whose predicted pass rate is nearest the target is kept.
Candidates are then deleted nearest first, until `max_candidates` were made or rolled back, with
the same refusal and failure records as the unsteered stage. Combined deletions are made after
verification by `run`'s combine step (`featdel.pipeline.delete.combine_all`); `annotate_combined`
records their knobs and the pass rate predicted from their parts.
"""

from __future__ import annotations

import json
import tempfile
import traceback
from collections.abc import Callable
from pathlib import Path

from featdel.curriculum import steer
from featdel.curriculum.model import DifficultyModel


def steering_file(run_dir: Path) -> Path:
    return Path(run_dir) / "steering.jsonl"


def read_steering(run_dir: Path) -> dict[str, dict]:
    path = steering_file(run_dir)
    if not path.exists():
        return {}
    rows = (json.loads(line) for line in path.read_text().splitlines() if line.strip())
    return {row.pop("deletion_id"): row for row in rows}


def _append(run_dir: Path, deletion_id: str, row: dict) -> None:
    with steering_file(run_dir).open("a") as f:
        f.write(json.dumps({"deletion_id": deletion_id, **row}, sort_keys=True) + "\n")


def steer_delete(run_dir: Path, model: DifficultyModel, *, target: float, learner: str, strategies: list[str],
                 max_candidates: int, seed: int, check_for: Callable, hide_tests: bool = True,
                 on_step: Callable[[str, str], None] = lambda repo, step: None) -> int:
    """Steered deletions for every mined repo not yet done; returns how many were made."""
    from featdel.code.coverage_map import CoverageMap
    from featdel.code.trees import extract
    from featdel.core.records import Verdict, VerdictStatus
    from featdel.core.rundir import RunDir
    from featdel.deletion import STRATEGIES, NotApplicable, RolledBack, delete
    from featdel.deletion.base import deletion_id
    from featdel.pipeline.delete import candidates

    rd = RunDir(run_dir)
    names = [n for n in strategies if n != "combine"]
    options = {"strategies": names, "max_candidates": max_candidates, "seed": seed, "target_pass_rate": target,
               "learner": learner}
    rd.stage_options("deleted", options, started=any(rd.deleted_marker(r.name).exists() for r in rd.mined()))
    made_total = 0
    for record in rd.mined():
        if rd.deleted_marker(record.name).exists():
            on_step(record.name, "resumed")
            continue
        on_step(record.name, "planning")
        pool = candidates(record, CoverageMap.load(rd.coverage(record.name)))
        with tempfile.TemporaryDirectory(prefix="featdel-orig-") as tmp:
            original = extract(rd.snapshot(record.name), Path(tmp) / "orig")
            counts = steer.identifier_counts(original)
            typical = steer.typical_similarity(model)
            by_key = {f"{c.path}::{c.qualname}::{c.kind}": c for c in pool}
            plans = {}
            for key, cand in by_key.items():
                fitting = [n for n in names if STRATEGIES[n].fits(cand)]
                base = steer.estimate(cand, original, counts, typical)
                plans[key] = [(k, steer.with_knobs(base, k)) for k in steer.knob_space(fitting, tests=hide_tests)]
            chosen = steer.choose(plans, model, target, seed=seed)
            check = check_for(record)(original)
            made = tried = 0
            seen: set[str] = set()
            on_step(record.name, "deleting")
            for choice in chosen:
                if made + tried >= max_candidates:
                    break
                cand, knobs = by_key[choice.key], choice.knobs
                target_ref = f"{cand.path}::{cand.qualname}"
                base = {"deletion_id": deletion_id(record.name, knobs.strategy, target_ref, knobs.docstrings_kept),
                        "repo": record.name, "strategy": knobs.strategy, "target": target_ref}
                try:
                    d = delete(original, cand, knobs.strategy, check=check, keep_docstrings=knobs.docstrings_kept,
                               seed=seed)
                except RolledBack as exc:
                    rd.add_verdict(Verdict(**base, status=VerdictStatus.REJECTED, stage="build", reason=str(exc)))
                    tried += 1
                    continue
                except NotApplicable as exc:
                    rd.add_verdict(Verdict(**base, status=VerdictStatus.REJECTED, stage="delete", reason=str(exc)))
                    continue
                except Exception as exc:  # noqa: BLE001 - one candidate's crash is recorded; the batch goes on
                    rd.add_verdict(Verdict(**base, status=VerdictStatus.BROKEN, stage="delete",
                                           traceback=traceback.format_exc(),
                                           reason=f"{type(exc).__name__}: {str(exc)[:200]}"))
                    continue
                if d.deletion_id in seen:
                    continue
                seen.add(d.deletion_id)
                rd.add_deletion(d)
                _append(run_dir, d.deletion_id, choice.record(learner=learner, target=target) | {"estimate": choice.difficulty})
                made += 1
        rd.deleted_marker(record.name).write_text(str(made))
        made_total += made
        on_step(record.name, "done")
    return made_total


def annotate_combined(run_dir: Path, model: DifficultyModel, *, target: float, learner: str) -> int:
    """Steering rows for `combine` deletions (made by `run`'s combine step from verified tasks)
    whose parts were steered: knobs, and the pass rate predicted from the parts' summed
    features. Returns how many rows were added."""
    from featdel.core.rundir import RunDir

    steering = read_steering(run_dir)
    added = 0
    for d in RunDir(run_dir).deletions():
        parts = [steering.get(p) for p in getattr(d, "parts", None) or []]
        if d.deletion_id in steering or not parts or not all(p and "estimate" in p for p in parts):
            continue
        knobs = steer.Knobs(strategy="combine", docstrings_kept=all(p["docstrings_kept"] for p in parts),
                            tests_visible=all(p["tests_visible"] for p in parts), combined=len(parts))
        feats = steer.with_knobs(steer.combined([p["estimate"] for p in parts]), knobs)
        choice = steer.Choice(key=d.deletion_id, knobs=knobs, difficulty=feats, predicted=model.predict(feats, "combine"))
        _append(run_dir, d.deletion_id, choice.record(learner=learner, target=target) | {"estimate": feats})
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
                           f"RESULTS --learner {learner} --run RUN`), and name RUN with --history")
    return model.fit(obs)


def steered_delete(out: Path, *, learner: str | None, target: float, history: list[Path], strategies: list[str] | None,
                   max_candidates: int, seed: int, backend) -> DifficultyModel:
    """The delete stage of `featdel run --target-pass-rate`, with a progress display."""
    from featdel.core.errors import FeatdelError
    from featdel.core.progress import StepProgress
    from featdel.core.rundir import RunDir
    from featdel.deletion import STRATEGIES
    from featdel.pipeline.verify import RepoContext, make_check

    if not learner:
        raise FeatdelError("--target-pass-rate needs --learner NAME (whose attempts fit the difficulty model)")
    fitted = history_model(history, learner)
    with StepProgress("steering", [r.name for r in RunDir(out).mined()]) as progress:
        steer_delete(out, fitted, target=target, learner=learner, strategies=strategies or list(STRATEGIES),
                     max_candidates=max_candidates, seed=seed, on_step=progress.step,
                     check_for=lambda record: make_check(RepoContext.load(out, record), backend))
    return fitted

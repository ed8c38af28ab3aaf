"""Stage 2, delete: pick tested symbols from the coverage map and apply deletion strategies.

In: a mined run directory and a `Planner` that orders each repository's attempts (the seeded
`SeededPlanner`, or a learner's difficulty model: featdel.curriculum.generate). Out:
`RUN_DIR/deletions.jsonl` (one `Deletion` per edit that passed the strategy's own
import-and-collect check) and verdicts in `verdicts.jsonl`: `rejected` at `build.rolled_back` for
a deletion the check rolled back (a candidate that failed, counted in the yield), `refused` for a
strategy that declined the target (not a candidate, counted apart). `max_candidates` counts the
made and the rolled back. The choice of candidates and strategies is seeded and deterministic. A repo whose deletions are done is marked
`deleted.done` and skipped on the next run.
"""

from __future__ import annotations

import random
import tempfile
import traceback
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from featdel.code.coverage_map import CoverageMap
from featdel.code.spans import is_test_path as python_test_path
from featdel.core.records import Candidate, Deletion, RepoRecord, Steering, Verdict, VerdictStatus
from featdel.core.rundir import RunDir


@dataclass(frozen=True, kw_only=True, slots=True)
class Bounds:
    """Which covered symbols are candidates."""

    min_tests: int = 1
    max_tests: int = 60
    min_lines: int = 3
    max_lines: int = 150


def is_test_path(rel: str) -> bool:
    """A test file in the language its name says (Python's rule for any other file)."""
    from featdel.lang import for_path

    lang = for_path(rel)
    return lang.is_test_path(rel) if lang is not None else python_test_path(rel)


def candidates(record: RepoRecord, cmap: CoverageMap, bounds: Bounds = Bounds()) -> list[Candidate]:
    """Functions, methods and classes run by passing, non-flaky tests; never tests or dunders."""
    out = []
    by_file: dict[str, set[str]] = {}
    for s in cmap.symbols:
        if not is_test_path(s.path):
            by_file.setdefault(s.path, set()).update(s.tests)
        name = s.qualname.rsplit(".", 1)[-1]
        if is_test_path(s.path) or (name.startswith("__") and name.endswith("__")):
            continue
        if not (bounds.min_tests <= len(s.tests) <= bounds.max_tests):
            continue
        if not (bounds.min_lines <= s.lines <= bounds.max_lines):
            continue
        out.append(Candidate(repo=record.name, path=s.path, qualname=s.qualname, kind=s.kind,
                             lines=s.lines, tests=s.tests))
    for path, tests in sorted(by_file.items()):
        if bounds.min_tests <= len(tests) <= bounds.max_tests * 4:
            out.append(Candidate(repo=record.name, path=path, qualname="", kind="file", lines=0, tests=sorted(tests)))
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    """One (candidate, strategy, docstrings) the delete stage will try, in the plan's order."""

    candidate: Candidate
    strategy: str
    keep_docstrings: bool
    steering: Steering | None = None  # recorded with the deletion when it is made (steered runs)


class Planner(Protocol):
    """Orders a repository's attempts. `options` is what the stage records in options.json."""

    options: dict

    def __call__(self, record: RepoRecord, original: Path, pool: list[Candidate]) -> list[Attempt]: ...


@dataclass(frozen=True, kw_only=True)
class SeededPlanner:
    """The unsteered plan: (candidate, strategy) pairs from a seeded rng, spread over candidates
    (featdel.deletion.choose), four per deletion to make."""

    strategies: list[str]
    max_candidates: int
    seed: int = 0
    keep_docstrings: bool = True
    strategy_options: dict[str, dict] | None = None

    @property
    def options(self) -> dict:
        return {k: v for k, v in (("strategies", self.strategies), ("max_candidates", self.max_candidates),
                                  ("seed", self.seed), ("keep_docstrings", self.keep_docstrings),
                                  ("strategy_options", self.strategy_options)) if v is not None}

    def __call__(self, record: RepoRecord, original: Path, pool: list[Candidate]) -> list[Attempt]:
        from featdel.deletion import choose

        rng = random.Random(self.seed ^ zlib.crc32(record.name.encode()))
        pairs = choose(pool, self.strategies, rng, max_pairs=self.max_candidates * 4, options=self.strategy_options)
        return [Attempt(candidate=c, strategy=name, keep_docstrings=self.keep_docstrings) for c, name in pairs]


# The verdicts the delete stage itself writes (a candidate rolled back, a refusal, a crash).
_DELETE_RULES = frozenset({"build.rolled_back", "delete.refused", "delete.crash"})


def delete_repo(record: RepoRecord, run_dir: Path, *, plan: Planner, max_candidates: int, seed: int,
                check_factory: Callable[[Path], Callable], bounds: Bounds = Bounds(),
                strategy_options: dict[str, dict] | None = None,
                on_step: Callable[[str, str], None] = lambda repo, step: None) -> list[Deletion]:
    """Deletions for one mined repo, tried in `plan`'s order until `max_candidates` were made or
    rolled back; `check_factory(original_tree)` gives the strategies' check. A strategy that
    refuses is a `refused` verdict and does not count; a crash on one attempt is `broken`."""
    from featdel.code.trees import extract
    from featdel.deletion import NotApplicable, RolledBack, delete
    from featdel.deletion.base import deletion_id

    rd = RunDir(run_dir)
    pool = candidates(record, CoverageMap.load(rd.coverage(record.name)), bounds)
    made: list[Deletion] = []
    seen: set[str] = set()
    tried: set[str] = set()  # attempt ids: one verdict per id, however many candidates share it
    # What an interrupted earlier call decided for this repository: the attempts replay in the
    # same order, and what was written is counted again, never written twice.
    written = {d.deletion_id: d for d in rd.deletions() if d.repo == record.name}
    decided = {v.deletion_id: v.rule for v in rd.verdicts() if v.repo == record.name and v.rule in _DELETE_RULES}
    with tempfile.TemporaryDirectory(prefix="featdel-orig-") as tmp:
        original = extract(rd.snapshot(record.name), Path(tmp) / "orig")
        on_step(record.name, "planning")
        attempts = plan(record, original, pool)
        check = check_factory(original)
        on_step(record.name, "deleting")
        rolled = 0
        for attempt in attempts:
            if len(made) + rolled >= max_candidates:
                break
            cand, name = attempt.candidate, attempt.strategy
            target = f"{cand.path}::{cand.qualname}"
            base = dict(deletion_id=deletion_id(record.name, name, target, attempt.keep_docstrings),
                        repo=record.name, strategy=name, target=target)
            if base["deletion_id"] in tried:  # two candidates of one name (a property's getter and setter)
                continue
            tried.add(base["deletion_id"])
            if base["deletion_id"] in written and base["deletion_id"] not in seen:
                seen.add(base["deletion_id"])
                made.append(written[base["deletion_id"]])
                continue
            if base["deletion_id"] in decided:
                rolled += decided[base["deletion_id"]] == "build.rolled_back"
                continue
            try:
                deletion = delete(original, cand, name, check=check, keep_docstrings=attempt.keep_docstrings,
                                  seed=seed, options=strategy_options)
            except RolledBack as exc:  # a deletion was made and the build check refused it: a candidate
                rd.add_verdict(Verdict(**base, status=VerdictStatus.REJECTED, stage="build", rule="build.rolled_back",
                                       reason=str(exc)))
                rolled += 1
                continue
            except NotApplicable as exc:  # the strategy refuses: a refusal, not a candidate
                rd.add_verdict(Verdict(**base, status=VerdictStatus.REFUSED, stage="delete", rule="delete.refused",
                                       reason=str(exc)))
                continue
            except Exception as exc:  # one candidate's crash is recorded; the batch goes on
                rd.add_verdict(Verdict(**base, status=VerdictStatus.BROKEN, stage="delete", rule="delete.crash",
                                       traceback=traceback.format_exc(), reason=f"{type(exc).__name__}: {str(exc)[:200]}"))
                continue
            if deletion.deletion_id in seen:
                continue  # a feature deletion can cover a later candidate exactly
            seen.add(deletion.deletion_id)
            if deletion.deletion_id in written:  # made before the interruption, under another attempt's id
                made.append(deletion)
                continue
            rd.add_deletion(deletion)
            if attempt.steering is not None:
                rd.add_steering(replace(attempt.steering, deletion_id=deletion.deletion_id))
            made.append(deletion)
    rd.deleted_marker(record.name).write_text(str(len(made)))
    return made


def delete_all(run_dir: Path, *, check_for: Callable[[RepoRecord], Callable], max_candidates: int,
               strategies: list[str] | None = None, seed: int = 0, keep_docstrings: bool = True,
               strategy_options: dict[str, dict] | None = None, plan: Planner | None = None,
               on_step: Callable[[str, str], None] = lambda repo, step: None, jobs: int = 1) -> list[Deletion]:
    """Run `delete_repo` for every mined repo not yet done, `jobs` repositories at a time (threads:
    the work is waiting on sandboxed checks); return all deletions of the run. Which deletions a
    repository gets does not depend on `jobs`, only the order of the lines. `check_for(record)`
    gives that repo's check factory (see `delete_repo`); `plan` orders the attempts (default:
    `SeededPlanner` over `strategies`)."""
    from featdel.core.parallel import thread_map

    plan = plan or SeededPlanner(strategies=strategies, max_candidates=max_candidates, seed=seed,
                                 keep_docstrings=keep_docstrings, strategy_options=strategy_options)
    rd = RunDir(run_dir)
    rd.stage_options("deleted", plan.options, started=any(rd.deleted_marker(r.name).exists() for r in rd.mined()))
    todo = []
    for record in rd.mined():
        if rd.deleted_marker(record.name).exists():
            on_step(record.name, "resumed")
        else:
            todo.append(record)

    def work(record: RepoRecord) -> str:
        factory = check_for(record)
        try:
            delete_repo(record, run_dir, plan=plan, max_candidates=max_candidates, seed=seed,
                        check_factory=factory, strategy_options=strategy_options, on_step=on_step)
        finally:
            getattr(factory, "close", lambda: None)()  # the factory's warm runners, where it has them
        return record.name

    for name in thread_map(work, todo, jobs):
        on_step(name, "done")
    return rd.deletions()


def combine_all(run_dir: Path, *, seed: int = 0, max_per_repo: int = 3, repos: set[str] | None = None) -> list[Deletion]:
    """The `combine` step, run after a first verify pass: for each repository, join 2-4 of its
    verified, disjoint deletions into new `combine` deletions (featdel.deletion.combine) and add
    those not yet in the run to `deletions.jsonl`, for a second verify pass. Deterministic in the
    seed and the verified set, so a resumed run adds nothing twice. A repository with fewer than
    two verified deletions gets a refusal verdict (not a candidate). `repos`: only these (names)."""
    from featdel.code.trees import extract
    from featdel.deletion.combine import combine

    rd = RunDir(run_dir)
    deletions = {d.deletion_id: d for d in rd.deletions()}
    verdicts = rd.verdicts()
    verified = {v.deletion_id for v in verdicts if v.status == VerdictStatus.VERIFIED}
    refused = {v.deletion_id for v in verdicts if v.strategy == "combine"}
    added: list[Deletion] = []
    for record in rd.mined():
        if repos is not None and record.name not in repos:
            continue
        if any(d.repo == record.name and d.strategy == "combine" for d in deletions.values()):
            continue  # combined once: a resumed run adds nothing
        parts = [d for i, d in deletions.items() if i in verified and d.repo == record.name and d.strategy != "combine"]
        rng = random.Random(seed ^ zlib.crc32(f"combine\0{record.name}".encode()))
        with tempfile.TemporaryDirectory(prefix="featdel-orig-") as tmp:
            original = extract(rd.snapshot(record.name), Path(tmp) / "orig")
            made = combine(original, parts, rng, max_tasks=max_per_repo) if len(parts) >= 2 else []
        if not made:
            why_id = f"{record.name}__combine__none"
            if why_id not in refused:
                rd.add_verdict(Verdict(deletion_id=why_id, repo=record.name, strategy="combine", target="",
                                       status=VerdictStatus.REFUSED, stage="delete", rule="delete.refused",
                                       reason=f"fewer than two verified deletions ({len(parts)})" if len(parts) < 2
                                       else f"no two of its {len(parts)} verified deletions are disjoint"))
            continue
        for d in made:
            if d.deletion_id not in deletions:
                rd.add_deletion(d)
                added.append(d)
    return added

"""The delete stage takes several repositories at a time (`featdel run -j`, `featdel delete -j`):
what each repository gets does not depend on how many run at once, and every line of the run
directory is whole. A stage killed in the middle of a repository and run again ends with what
an uninterrupted one writes: nothing twice, nothing missing."""

from __future__ import annotations

import json
import shutil

import pytest

from featdel.core.records import RepoStatus
from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.mine import Thresholds, mine
from tests.conftest import TINY_LIB, make_repo


STRATEGIES = ["body", "function", "feature"]


@pytest.fixture(scope="module")
def mined(tmp_path_factory, featdel_cache, local_backend):
    """Two mined copies of the tiny library in one run directory, no deletions yet."""
    root = tmp_path_factory.mktemp("two")
    sources = [make_repo(root / "src" / name, TINY_LIB) for name in ("alib", "blib")]
    records = mine([CorpusEntry(source=str(s), overrides=Overrides()) for s in sources], root / "mined",
                   backend=local_backend, thresholds=Thresholds(min_passing=3, min_coverage=10.0), jobs=2)
    assert [r.status for r in records] == [RepoStatus.MINED] * 2, [r.reason for r in records]
    return root / "mined", records


def lines(run_dir) -> list[str]:
    """Every record the delete stage wrote, normalised and sorted (json.loads fails on a torn line)."""
    rd = RunDir(run_dir)
    text = rd.deletions_jsonl.read_text().splitlines() + rd.verdicts_jsonl.read_text().splitlines()
    return sorted(json.dumps(json.loads(line), sort_keys=True) for line in text)


def delete(run_dir, backend, check=None, **kw):
    return delete_all(run_dir, strategies=STRATEGIES, max_candidates=4, seed=0,
                      check_for=check or (lambda r: make_check(RepoContext.load(run_dir, r), backend)), **kw)


def test_two_repositories_at_a_time_make_the_same_deletions(mined, tmp_path, local_backend):
    src, records = mined
    made = {}
    for jobs in (1, 2):
        run_dir = shutil.copytree(src, tmp_path / f"j{jobs}")
        steps = []
        delete(run_dir, local_backend, on_step=lambda item, step: steps.append((item, step)), jobs=jobs)
        made[jobs] = lines(run_dir)
        assert sorted(item for item, step in steps if step == "done") == sorted(r.name for r in records)
    assert made[1] == made[2] and len({json.loads(x).get("repo") for x in made[1]}) == 2


def test_a_stage_killed_inside_a_repository_resumes_without_writing_anything_twice(mined, tmp_path, local_backend):
    src, _ = mined
    whole = shutil.copytree(src, tmp_path / "whole")
    delete(whole, local_backend)
    cut = shutil.copytree(src, tmp_path / "cut")
    calls = []

    def dying(record):  # the fourth build check of the run never returns: the process is killed
        check_of = make_check(RepoContext.load(cut, record), local_backend)

        def factory(original):
            check = check_of(original)

            def once(edits):
                calls.append(1)
                if len(calls) == 4:
                    raise KeyboardInterrupt
                return check(edits)

            return once

        return factory

    with pytest.raises(KeyboardInterrupt):
        delete(cut, local_backend, check=dying)
    assert 0 < len(lines(cut)) < len(lines(whole))  # killed with part of a repository written
    delete(cut, local_backend)
    assert lines(cut) == lines(whole)


def test_two_candidates_of_one_name_are_tried_once(mined, tmp_path, local_backend):
    """A property's getter and setter are two candidates with one target, so one deletion id: the
    second must not be tried again, or its refusal or rollback is written twice (semver 3.0.2's
    `Version.minor` was, in a corpus run)."""
    from dataclasses import dataclass

    from featdel.pipeline.delete import SeededPlanner

    src, _ = mined
    seeded = SeededPlanner(strategies=STRATEGIES, max_candidates=4)

    @dataclass(frozen=True)
    class Twice:  # every attempt of the seeded plan, each followed by its twin
        options = seeded.options

        def __call__(self, record, original, pool):
            return [a for attempt in seeded(record, original, pool) for a in (attempt, attempt)]

    once = shutil.copytree(src, tmp_path / "once")
    delete(once, local_backend, plan=seeded)
    twice = shutil.copytree(src, tmp_path / "twice")
    delete(twice, local_backend, plan=Twice())
    verdicts = [json.loads(x) for x in RunDir(twice).verdicts_jsonl.read_text().splitlines()]
    assert verdicts, "no refusal or rollback to write twice: the test would prove nothing"
    assert lines(twice) == lines(once)

"""`featdel run -j 2` overlaps its stages (featdel.pipeline.overlap): a repository is deleted from
and verified while another still mines. What a run decides does not depend on it: the same
repositories, deletions and verdicts (combine pass included) as the stages one after another, and
a run stopped in the middle and run again ends with what an uninterrupted one writes, nothing
twice."""

from __future__ import annotations

import json

import pytest

from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.mine import Thresholds
from featdel.pipeline.run import DeleteOptions, run
from featdel.pipeline.verify import VerifyOptions
from tests.conftest import TINY_LIB, make_repo

THRESHOLDS = Thresholds(min_passing=3, min_coverage=10.0)
DELETE = DeleteOptions(strategies=["body", "function", "combine"], max_candidates=2)
VERIFY = VerifyOptions(reruns=2)


@pytest.fixture(scope="module")
def entries(tmp_path_factory, featdel_cache):
    root = tmp_path_factory.mktemp("overlap")
    return [CorpusEntry(source=str(make_repo(root / name, TINY_LIB)), overrides=Overrides())
            for name in ("alib", "blib")]


@pytest.fixture(scope="module")
def whole(entries, tmp_path_factory, local_backend):
    """A run of both, overlapped and uninterrupted."""
    run_dir = tmp_path_factory.mktemp("whole") / "run"
    run(entries, run_dir, local_backend, thresholds=THRESHOLDS, delete=DELETE, verify=VERIFY, jobs=2)
    return run_dir


def decided(run_dir) -> tuple:
    """The run's records, deletions and verdicts, without times, sorted; and how many lines of each."""
    rd = RunDir(run_dir)
    repos = sorted((r.name, r.status) for r in rd.latest_repos().values())
    deletions = sorted(json.dumps(json.loads(line), sort_keys=True) for line in rd.deletions_jsonl.read_text().splitlines())
    verdicts = sorted((v.deletion_id, v.status, v.rule, tuple(v.FAIL_TO_PASS), tuple(v.PASS_TO_PASS))
                      for v in rd.verdicts())
    return repos, deletions, verdicts


def test_overlapped_stages_decide_what_staged_ones_decide(entries, whole, tmp_path, local_backend):
    run(entries, tmp_path / "staged", local_backend, thresholds=THRESHOLDS, delete=DELETE, verify=VERIFY, jobs=1)
    repos, deletions, verdicts = decided(whole)
    assert decided(tmp_path / "staged") == (repos, deletions, verdicts)
    assert len(repos) == 2 and any(v[1] == "verified" for v in verdicts)
    assert any('"strategy": "combine"' in d for d in deletions)  # the combine pass ran inside the overlap
    assert len({v[0] for v in verdicts}) == len(verdicts)  # no verdict twice


def test_an_overlapped_run_stopped_in_the_middle_resumes_to_the_same_end(entries, whole, tmp_path, local_backend,
                                                                         monkeypatch):
    import featdel.pipeline.verify as verify

    real, calls = verify.verify_in, []

    def stop_at_the_fourth(*args, **kw):
        calls.append(1)
        if len(calls) == 4:
            raise KeyboardInterrupt  # as ctrl-c in the middle of the run
        return real(*args, **kw)

    cut = tmp_path / "cut"
    monkeypatch.setattr(verify, "verify_in", stop_at_the_fourth)
    with pytest.raises(KeyboardInterrupt):
        run(entries, cut, local_backend, thresholds=THRESHOLDS, delete=DELETE, verify=VERIFY, jobs=2)
    monkeypatch.setattr(verify, "verify_in", real)
    assert 0 < len(RunDir(cut).verdicts()) < len(RunDir(whole).verdicts())
    run(entries, cut, local_backend, thresholds=THRESHOLDS, delete=DELETE, verify=VERIFY, jobs=2)
    assert decided(cut) == decided(whole)

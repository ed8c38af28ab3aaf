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


def test_the_next_task_is_the_earliest_stage_then_the_longest_chain_of_verification():
    """`_next`'s order: mining, then deleting, then verifying; among verifications, the
    repository with the most work ahead in its suite's seconds (two suites a candidate, eight a
    combined deletion, and eight for a combine pass still to come), first come first served
    among equals: a heavy repository's candidates first, until what it has left is no more
    than a lighter one's, so that no combine pass runs alone at the end."""
    from featdel.core.records import RepoRecord
    from featdel.pipeline.overlap import _next

    light, heavy = (RepoRecord(source=n, name=n, suite_seconds=s) for n, s in (("light", 0.5), ("heavy", 1.0)))
    pending = [("verify", i, light, f"light-{i}") for i in range(4)]  # light: (8 + 4 x 2) x 0.5 = 8
    pending += [("verify", 10 + i, heavy, f"heavy-{i}") for i in range(3)]  # heavy: (8 + 3 x 2) x 1 = 14
    pending += [("delete", 20, light, "delete"), ("mine", 21, None, "mine")]
    taken = [_next(pending, combined=set(), combine=True)[3] for _ in range(9)]
    # heavy 14 > 8, then 12 > 8, then 10 > 8; then light 8 against heavy's 8 (the older first)
    assert taken[:2] == ["mine", "delete"]
    assert taken[2:] == ["heavy-0", "heavy-1", "heavy-2", "light-0", "light-1", "light-2", "light-3"]
    # a combined deletion waiting (its repository's pass ran) weighs eight suites
    pending = [("verify", 0, heavy, "heavy-single"), ("verify", 1, light, "light-combined")]
    assert _next(pending, combined={"light"}, combine=True)[3] == "heavy-single"  # 10 x 1 > 8 x 0.5
    pending = [("verify", 0, light, "light-combined"), ("verify", 1, heavy, "heavy-combined")]
    assert _next(pending, combined={"light", "heavy"}, combine=True)[3] == "heavy-combined"  # 8 x 1 > 8 x 0.5
    # without the combine strategy no pass is to come: only the candidates count
    pending = [("verify", 0, light, "light-a"), ("verify", 1, light, "light-b"), ("verify", 2, heavy, "heavy")]
    assert _next(pending, combined=set(), combine=False)[3] == "light-a"  # 2 x 2 x 0.5 = 2 x 1: the older
    pending.append(("verify", 3, heavy, "heavy-2"))
    assert _next(pending, combined=set(), combine=False)[3] == "heavy"  # 2 x 2 x 1 > 2 x 2 x 0.5

def test_a_source_that_cannot_be_fetched_ahead_is_mining_s_to_record(tmp_path, featdel_cache):
    """Sources are fetched on threads of their own before mining (`_pin`); a failure there
    raises nothing, and mining meets it again and records it as the repository's verdict."""
    from featdel.pipeline.overlap import _pin

    missing = str(tmp_path / "no-such-repo")
    assert _pin(missing) is None
    rd_dir = tmp_path / "run"
    entry = CorpusEntry(source=missing, overrides=Overrides())
    from featdel.sandboxes import get_backend

    run([entry], rd_dir, get_backend("local"), thresholds=THRESHOLDS, delete=DELETE, verify=VERIFY, jobs=2,
        on_mined=lambda records: None)
    [record] = RunDir(rd_dir).latest_repos().values()
    assert record.status == "broken" and "no such directory" in record.reason

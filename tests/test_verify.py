"""Deletion -> verification -> shards on a tiny real repository, end to end.

Pins: `featdel evaluate` resolves every gold prediction and no empty one, records a bad
prediction line as `patch_failed` and resumes; a task a trivial body solves is rejected at
`stub`; a crash on one candidate is a `broken` verdict with its traceback; every verified task's
start state, rebuilt from the shards alone, fails its F2P tests and
passes them all (and P2P) once `patch` is applied; a skipped test is never counted as a failure;
a broken environment is `broken`, never `rejected`; shards load in DuckDB and `datasets` with
F2P as real lists; stages resume without redoing work.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from featdel.code.trees import apply_patch, start_state
from featdel.core.records import Deletion, VerdictStatus, read_jsonl
from featdel.core.shards import TASK_SCHEMA, read_envs, read_tasks
from featdel.env.testrun import RunOptions, run_suite
from featdel.pipeline.context import RepoContext
from featdel.pipeline.package import package
from featdel.pipeline.verify import VerifyOptions, verify_all, verify_one
from tests.conftest import TINY_LIB, assert_tasks_round_trip, delete_and_verify, mine_tiny


def _deleted(ctx: RepoContext, root: Path, path: str, qualname: str, lines: int, tests: list[str], *,
             kind: str = "function", strategy: str = "body") -> Deletion:
    """One candidate of `ctx`'s repository, deleted by `strategy` from its original extracted at `root`."""
    from featdel.code.trees import extract
    from featdel.core.records import Candidate
    from featdel.deletion import delete

    original = extract(ctx.snapshot, root)
    cand = Candidate(repo=ctx.record.name, path=path, qualname=qualname, kind=kind, lines=lines, tests=tests)
    return delete(original, cand, strategy, check=lambda edits: True)

# A test that skips when the feature is missing: deleting `whisper` must not count it as F2P.
SKIPPING = {
    **TINY_LIB,
    "tests/test_skip.py": (
        "import pytest\nimport tinylib.text as t\n\n\n"
        "def test_whisper_or_skip():\n"
        "    try:\n        out = t.whisper('A')\n    except NotImplementedError:\n        pytest.skip('no whisper')\n"
        "    assert (type(out), out) == (str, 'a')\n"
    ),
    # `pass` is as good as the real body here: the stub rule must reject a task made of it.
    "tinylib/box.py": "def clear(d):\n    \"\"\"Empty `d` in place.\"\"\"\n    d.clear()\n    d.update({})\n    return None\n",
    "tests/test_box.py": "from tinylib.box import clear\n\n\ndef test_clear_returns_none():\n    assert clear({1: 2}) is None\n",
    # A test that checks its own name (pyparsing's test_example_rr_diags does): the grader's twin
    # of it fails under gold, so it cannot be F2P.
    "tests/test_own_name.py": ("from tinylib import shout\n\n\ndef test_shout_by_name(request):\n"
                               "    assert request.node.name == 'test_shout_by_name'\n    out = shout('a')\n"
                               "    assert (type(out), out) == (str, 'A!')\n"),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, featdel_cache, local_backend):
    run_dir, _ = mine_tiny(tmp_path_factory, "tinylib", SKIPPING, local_backend)
    verdicts = delete_and_verify(run_dir, local_backend, strategies=["body", "function", "method", "class", "feature"],
                                 max_candidates=6, reruns=2)
    package(run_dir)
    return run_dir, verdicts


def test_some_deletions_verify(run):
    run_dir, verdicts = run
    verified = [v for v in verdicts if v.status == VerdictStatus.VERIFIED]
    assert verified, [(v.deletion_id, v.stage, v.reason) for v in verdicts]
    assert {v.strategy for v in verified} >= {"body"}
    for v in verified:
        assert v.FAIL_TO_PASS and not set(v.FAIL_TO_PASS) & set(v.PASS_TO_PASS)
        assert "tests/test_calc.py::test_flaky" not in v.FAIL_TO_PASS + v.PASS_TO_PASS


def test_skipped_test_is_not_a_failure(run, local_backend, tmp_path):
    run_dir, verdicts = run
    for v in verdicts:
        assert "tests/test_skip.py::test_whisper_or_skip" not in v.FAIL_TO_PASS
    from featdel.core.rundir import RunDir

    ctx = RepoContext.load(run_dir, RunDir(run_dir).mined()[0])
    tests = ["tests/test_skip.py::test_whisper_or_skip", "tests/test_text.py::test_whisper"]
    deletion = _deleted(ctx, tmp_path / "orig", "tinylib/text.py", "whisper", 2, tests)
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    assert verdict.status == VerdictStatus.VERIFIED, verdict
    assert verdict.FAIL_TO_PASS == ["tests/test_text.py::test_whisper"]
    # It passed at baseline, so the fix must keep it passing: P2P is the whole passing baseline.
    assert "tests/test_skip.py::test_whisper_or_skip" in verdict.PASS_TO_PASS


def test_shards_rebuild_start_state_that_fails_and_gold_patch_restores(run, local_backend, tmp_path):
    run_dir, _ = run
    assert_tasks_round_trip(run_dir, local_backend, tmp_path)


def test_start_state_has_one_commit_and_no_deleted_line(run, tmp_path):
    run_dir, _ = run
    import subprocess

    task = read_tasks(run_dir).to_pylist()[0]
    snapshot = tmp_path / "s.tar.gz"
    snapshot.write_bytes(read_envs(run_dir).to_pylist()[0]["snapshot"])
    start = start_state(snapshot, task["deletion_patch"], tmp_path / "start")
    log = subprocess.run(["git", "log", "--all", "--oneline"], cwd=start, capture_output=True, text=True).stdout
    assert len(log.splitlines()) == 1
    refs = subprocess.run(["git", "for-each-ref"], cwd=start, capture_output=True, text=True).stdout
    assert len(refs.splitlines()) == 1
    deletion = next(d for d in read_jsonl(run_dir / "deletions.jsonl", Deletion) if d.deletion_id == task["instance_id"])
    body_lines = {ln.strip() for s in deletion.removed for ln in s.splitlines()[1:] if len(ln.strip()) > 12}
    text = "\n".join(p.read_text() for p in start.rglob("*.py"))
    assert not [ln for ln in body_lines if ln in text and ln not in deletion.files.get(deletion.target.split("::")[0], "")]


def test_shards_load_in_duckdb_and_datasets(run):
    run_dir, _ = run
    import duckdb

    [(n, f2p_type)] = duckdb.sql(
        f"select count(*), typeof(any_value(FAIL_TO_PASS)) from read_parquet('{run_dir}/tasks/*.parquet')"
    ).fetchall()
    assert n == read_tasks(run_dir).num_rows and f2p_type == "VARCHAR[]"
    import datasets

    ds = datasets.load_dataset("parquet", data_files=str(run_dir / "tasks" / "*.parquet"), split="train")
    assert isinstance(ds[0]["FAIL_TO_PASS"], list)
    assert set(TASK_SCHEMA.names) <= set(ds.column_names)


def test_broken_environment_is_broken_not_rejected(run, local_backend, tmp_path):
    run_dir, _ = run
    from dataclasses import replace

    from featdel.core.rundir import RunDir

    record = RunDir(run_dir).mined()[0]
    ctx = RepoContext.load(run_dir, record)
    fake_root = tmp_path / "env"
    (fake_root / "src").mkdir(parents=True)
    (fake_root / "venv" / "bin").mkdir(parents=True)  # no interpreter inside: the env is broken
    ctx.env = replace(ctx.env, root=fake_root)
    deletion = read_jsonl(run_dir / "deletions.jsonl", Deletion)[0]
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    assert verdict.status == VerdictStatus.BROKEN, verdict


def test_verify_resumes(run, local_backend):
    run_dir, verdicts = run
    before = (run_dir / "verdicts.jsonl").read_text()
    again = verify_all(run_dir, local_backend, VerifyOptions(reruns=2))
    assert (run_dir / "verdicts.jsonl").read_text() == before
    assert len(again) == len(verdicts)


def test_hidden_tests_leave_the_start_state_and_test_patch_restores_them(run, local_backend, tmp_path):
    run_dir, _ = run
    import shutil

    hidden_run = tmp_path / "hidden"
    shutil.copytree(run_dir, hidden_run)
    package(hidden_run, hide_tests=True)
    env_row = read_envs(hidden_run).to_pylist()[0]
    snapshot = tmp_path / "snapshot.tar.gz"
    snapshot.write_bytes(env_row["snapshot"])
    record = json.loads((run_dir / "repos.jsonl").read_text().splitlines()[-1])
    from featdel.env.envs import load

    env = load(Path(record["env_dir"]))
    task = read_tasks(hidden_run).to_pylist()[0]
    assert task["difficulty"]["tests_visible"] is False and task["test_patch"]
    start = start_state(snapshot, task["deletion_patch"], tmp_path / "start")
    test_files = {t.split("::")[0] for t in task["FAIL_TO_PASS"]}
    assert not any((start / f).exists() for f in test_files)
    apply_patch(start, task["test_patch"])
    f2p, p2p = task["FAIL_TO_PASS"], task["PASS_TO_PASS"]
    assert not run_suite(env, local_backend, RunOptions(tests=f2p), tree=start).passed() & set(f2p)
    apply_patch(start, task["patch"])
    assert run_suite(env, local_backend, RunOptions(tests=f2p + p2p), tree=start).passed() == set(f2p + p2p)


def test_a_deletion_that_makes_tests_hang_is_rejected_at_the_timeout(run, local_backend):
    run_dir, _ = run
    from featdel.core.rundir import RunDir

    record = RunDir(run_dir).mined()[0]
    ctx = RepoContext.load(run_dir, record)
    text = SKIPPING["tinylib/text.py"].replace("def whisper(s):\n    return s.lower()",
                                               "def whisper(s):\n    while True:\n        pass")
    deletion = Deletion(deletion_id="tinylib__hang__0", repo=record.name, strategy="body",
                        target="tinylib/text.py::whisper", deleted_symbols=["tinylib/text.py::whisper"],
                        files={"tinylib/text.py": text}, removed=["    return s.lower()\n"])
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1, timeout_s=5))
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "tests"), verdict
    assert "did not finish within 5s" in verdict.reason


def test_an_edit_that_does_not_parse_is_rejected_at_build(run, local_backend):
    run_dir, _ = run
    from featdel.core.rundir import RunDir

    record = RunDir(run_dir).mined()[0]
    ctx = RepoContext.load(run_dir, record)
    deletion = Deletion(deletion_id="tinylib__bad__0", repo=record.name, strategy="body",
                        target="tinylib/text.py::whisper", deleted_symbols=["tinylib/text.py::whisper"],
                        files={"tinylib/text.py": "def whisper(s:\n    return\n"}, removed=["    return s.lower()\n"])
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "build"), verdict
    assert verdict.reason == "tinylib/text.py does not parse after the deletion"


def test_show_and_materialize_read_the_shards(run, tmp_path, monkeypatch):
    run_dir, _ = run
    import subprocess

    from typer.testing import CliRunner

    from featdel.cli.main import app

    task = read_tasks(run_dir).to_pylist()[0]
    shown = CliRunner().invoke(app, ["show", str(run_dir), task["instance_id"]])
    assert shown.exit_code == 0 and task["FAIL_TO_PASS"][0] in shown.stdout
    listed = CliRunner().invoke(app, ["show", str(run_dir)])
    assert listed.exit_code == 0 and task["instance_id"] in listed.stdout
    dest = tmp_path / "task"
    made = CliRunner().invoke(app, ["materialize", str(run_dir), task["instance_id"], str(dest)])
    assert made.exit_code == 0, made.stdout
    assert "featdel sandbox exec --workdir" in made.stdout
    log = subprocess.run(["git", "log", "--oneline"], cwd=dest, capture_output=True, text=True).stdout
    assert len(log.splitlines()) == 1
    again = CliRunner().invoke(app, ["materialize", str(run_dir), task["instance_id"], str(dest)])
    assert again.exit_code == 2 and "exists" in again.output
    monkeypatch.chdir(tmp_path)  # a relative DEST (git read its work tree relative to the new folder)
    relative = CliRunner().invoke(app, ["materialize", str(run_dir), task["instance_id"], "rel/task"])
    assert relative.exit_code == 0 and (tmp_path / "rel" / "task" / "tinylib").is_dir(), relative.output
    unknown = CliRunner().invoke(app, ["show", str(run_dir), "no-such-task"])
    assert unknown.exit_code == 2 and "no task no-such-task" in unknown.output


def test_evaluate_gold_resolves_empty_does_not_and_bad_lines_are_recorded(run, local_backend, tmp_path):
    run_dir, _ = run
    from featdel.grading.evaluate import evaluate, logs_dir
    from featdel.grading.grade import GradeStatus

    tasks = read_tasks(run_dir).to_pylist()
    preds = tmp_path / "preds.jsonl"
    lines = [json.dumps({"instance_id": t["instance_id"], "model_patch": t["patch"], "model_name_or_path": "gold"})
             for t in tasks]
    lines += [json.dumps({"instance_id": t["instance_id"], "model_patch": "", "model_name_or_path": "empty"})
              for t in tasks]
    lines += ["{not json", json.dumps({"instance_id": "nope__x", "model_patch": "", "model_name_or_path": "empty"})]
    preds.write_text("\n".join(lines) + "\n")
    out = tmp_path / "results.jsonl"
    results = evaluate(run_dir, preds, out, local_backend, jobs=2)
    by = {}
    for r in results:
        by.setdefault(r.model_name_or_path, []).append(r)
    assert {r.status for r in by["gold"]} == {GradeStatus.RESOLVED}, [r.reason for r in by["gold"]]
    assert len(by["gold"]) == len(tasks)
    assert {r.status for r in by["empty"] if r.instance_id != "nope__x"} == {GradeStatus.UNRESOLVED}
    assert [r.status for r in by[""]] == [GradeStatus.PATCH_FAILED]  # the line that is not JSON
    assert next(r for r in by["empty"] if r.instance_id == "nope__x").status == GradeStatus.PATCH_FAILED
    folder = logs_dir(out) / "gold" / tasks[0]["instance_id"]
    assert json.loads((folder / "result.json").read_text())["status"] == "resolved"
    before = out.read_text()
    assert len(evaluate(run_dir, preds, out, local_backend)) == len(results)  # resumed: nothing redone
    assert out.read_text() == before


def test_a_task_a_trivial_body_solves_is_rejected_at_stub(run, local_backend, tmp_path):
    run_dir, _ = run
    from featdel.core.rundir import RunDir

    ctx = RepoContext.load(run_dir, RunDir(run_dir).mined()[0])
    deletion = _deleted(ctx, tmp_path / "orig", "tinylib/box.py", "clear", 4,
                        ["tests/test_box.py::test_clear_returns_none"])
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "stub"), verdict


def test_a_test_bound_to_its_own_name_leaves_f2p_instead_of_failing_gold(run, local_backend, tmp_path):
    """Its twin (featdel.grading.canaries) fails under gold, which made every deletion of `shout`
    `gold.unresolved` (suspect); the test leaves F2P, the others stay, and the task verifies."""
    run_dir, _ = run
    from featdel.core.rundir import RunDir

    ctx = RepoContext.load(run_dir, RunDir(run_dir).mined()[0])
    bound, plain = "tests/test_own_name.py::test_shout_by_name", "tests/test_text.py::test_shout"
    deletion = _deleted(ctx, tmp_path / "orig", "tinylib/text.py", "shout", 3, [plain, bound])
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    assert verdict.status == VerdictStatus.VERIFIED, verdict
    assert plain in verdict.FAIL_TO_PASS and bound not in verdict.FAIL_TO_PASS + verdict.PASS_TO_PASS


def test_a_crash_on_one_candidate_is_a_broken_verdict_with_its_traceback(run, local_backend, tmp_path):
    run_dir, _ = run
    from dataclasses import replace

    from featdel.core.records import VerdictStatus
    from featdel.core.rundir import RunDir

    record = RunDir(run_dir).mined()[0]
    ctx = RepoContext.load(run_dir, record)
    good = next(d for d in read_jsonl(run_dir / "deletions.jsonl", Deletion) if d.strategy == "body")
    # A symbol in a file the repository does not have: reading it fails deep inside a rule.
    bad = replace(good, deleted_symbols=[*good.deleted_symbols, "tinylib/missing.py::ghost"])
    verdict = verify_one(ctx, bad, local_backend, VerifyOptions(reruns=1))
    assert (verdict.status, verdict.stage) == (VerdictStatus.BROKEN, "crash"), verdict
    assert "Traceback" in verdict.traceback and "missing.py" in verdict.traceback


def test_a_copy_of_the_package_in_the_environment_is_a_leak(run, local_backend, tmp_path):
    run_dir, verdicts = run
    import shutil

    from featdel.code import exposure
    from featdel.code.trees import extract
    from featdel.core.records import VerdictStatus
    from featdel.core.rundir import RunDir

    record = RunDir(run_dir).mined()[0]
    ctx = RepoContext.load(run_dir, record)
    verified = {v.deletion_id for v in verdicts if v.status == VerdictStatus.VERIFIED}
    deletion = next(d for d in read_jsonl(run_dir / "deletions.jsonl", Deletion) if d.deletion_id in verified)
    site = next(ctx.env.venv.glob("lib/python3*/site-packages"))
    copy = site / "_vendor" / "tinylib"
    shutil.copytree(extract(ctx.snapshot, tmp_path / "orig") / "tinylib", copy)
    exposure.forget()
    try:
        verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=1))
    finally:
        shutil.rmtree(site / "_vendor")
        exposure.forget()
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "leak"), verdict
    assert "another copy of the package `tinylib`" in verdict.reason


def test_resuming_verification_with_other_options_says_so(run, local_backend):
    run_dir, _ = run
    from featdel.core.errors import RunDirError

    with pytest.raises(RunDirError, match="reruns=2"):
        verify_all(run_dir, local_backend, VerifyOptions(reruns=4))


def test_change_scoped_and_whole_suite_verification_agree(run, local_backend, tmp_path, monkeypatch):
    """The same candidates verified again with every run over the whole suite (`full_suite`)
    end in the same verdicts, rules, F2P and P2P lists; the change-scoped no-op run takes F2P
    alone and its gold run part of P2P (without a sample, on this small suite), the whole-suite ones
    all of it."""
    import shutil

    from featdel.pipeline import gates

    run_dir, verdicts = run
    from featdel.env.testrun import SuiteRunner

    graded: list[tuple[bool, int, int]] = []  # (gold?, P2P tests run, P2P tests of the task)
    real, real_run = gates.grade, SuiteRunner.run_suite
    merged: list[list[str]] = []  # the selections a build check's run took

    def watched(task, patch, backend, **kw):
        graded.append((bool(patch), len(task.p2p_to_run()), len(task.pass_to_pass)))
        return real(task, patch, backend, **kw)

    def run_suite(self, options=RunOptions(), *, tree=None):
        if options.run_only is not None:
            merged.append(options.run_only)
        return real_run(self, options, tree=tree)

    monkeypatch.setattr(gates, "grade", watched)
    monkeypatch.setattr(SuiteRunner, "run_suite", run_suite)
    whole = tmp_path / "whole"
    shutil.copytree(run_dir, whole, ignore=shutil.ignore_patterns("verdicts.jsonl", "tasks", "envs"))
    # ... and with a test process for the build check and another for the first run (the
    # module's verdicts took both in one: `merge_first_run`, the default)
    again = {v.deletion_id: v for v in verify_all(whole, local_backend, VerifyOptions(
        reruns=2, full_suite=True, merge_first_run=False))}
    assert graded and all(ran == of for _, ran, of in graded)  # whole suite: every P2P test runs
    assert not merged
    checked = [v for v in verdicts if v.stage != "delete"]  # the delete stage's own verdicts stay out
    assert checked and {v.deletion_id for v in checked} == set(again)
    for v in checked:
        w = again[v.deletion_id]
        assert (w.status, w.rule, w.FAIL_TO_PASS, w.PASS_TO_PASS) == (v.status, v.rule, v.FAIL_TO_PASS,
                                                                      v.PASS_TO_PASS), v.deletion_id
    graded.clear()
    scoped = tmp_path / "scoped"
    shutil.copytree(run_dir, scoped, ignore=shutil.ignore_patterns("verdicts.jsonl", "tasks", "envs"))
    verify_all(scoped, local_backend, VerifyOptions(reruns=2, p2p_sample=0))  # no sample: what the change touches
    assert merged and all(merged)
    noop = [(ran, of) for gold, ran, of in graded if not gold]
    gold = [(ran, of) for is_gold, ran, of in graded if is_gold]
    assert noop and all(ran == 0 for ran, _ in noop)
    assert gold and all(ran <= of for ran, of in gold) and any(ran < of for ran, of in gold)


def test_test_modules_importing_a_changed_module(run):
    from featdel.core.rundir import RunDir

    run_dir, _ = run
    [record] = RunDir(run_dir).mined()
    ctx = RepoContext.load(run_dir, record)
    assert ctx.test_modules_importing({"tinylib/box.py"}) == {"tests/test_box.py"}
    # `import tinylib.text as t`; test_text.py's `from tinylib import shout` imports the package only
    assert ctx.test_modules_importing({"tinylib/text.py"}) == {"tests/test_skip.py"}
    # every import of a submodule runs the package's __init__ too
    assert ctx.test_modules_importing({"tinylib/__init__.py"}) >= {"tests/test_box.py", "tests/test_text.py",
                                                                  "tests/test_calc.py", "tests/test_skip.py"}
    assert ctx.original() == ctx.original() and (ctx.original() / "tinylib" / "box.py").is_file()


def test_a_run_collects_the_whole_suite_and_runs_only_what_it_is_told(run, local_backend):
    """`RunOptions.run_only` (the build check's run taking the first selection): every test is
    collected (`found`), only the named ones run, and the report is complete."""
    from featdel.core.rundir import RunDir

    run_dir, _ = run
    ctx = RepoContext.load(run_dir, RunDir(run_dir).mined()[0])
    wanted = ["tests/test_text.py::test_shout", "tests/test_calc.py::test_add"]
    with ctx.runner(local_backend) as runner:
        suite = runner.run_suite(RunOptions(run_only=wanted))
        plain = runner.run_suite(RunOptions(tests=wanted))
    assert suite.broken is None, suite.broken
    assert set(suite.found) >= set(ctx.collected) and len(suite.found) > len(wanted)
    assert sorted(suite.collected) == sorted(plain.collected) == sorted(plain.found) == sorted(wanted)
    assert suite.outcomes == plain.outcomes == {t: "passed" for t in wanted}
    for bad in (RunOptions(run_only=[]), RunOptions(run_only=wanted, tests=wanted),
                RunOptions(run_only=wanted, collect_only=True)):
        with pytest.raises(ValueError, match="run_only"), ctx.runner(local_backend) as runner:
            runner.run_suite(bad)


def test_a_malformed_list_of_what_was_collected_voids_the_report():
    import hashlib
    import hmac

    from featdel.env.stream import parse

    key = b"k" * 32

    def signed(records):
        lines = []
        for seq, record in enumerate(records):
            body = json.dumps(record).encode()
            mac = hmac.new(key, str(seq).encode() + b"\n" + body, hashlib.sha256).hexdigest().encode()
            lines.append(str(seq).encode() + b" " + mac + b" " + body)
        return b"\n".join(lines) + b"\n"

    start, end = {"kind": "start"}, {"kind": "end", "exitstatus": 0}
    test = {"kind": "test", "id": "t.py::a", "outcome": "passed"}
    good = parse(signed([start, {"kind": "collected", "ids": ["t.py::a"], "found": ["t.py::a", "t.py::b"]}, test, end]),
                 key)
    assert good.problem is None and good.found == ["t.py::a", "t.py::b"] and good.collected == ["t.py::a"]
    bad = parse(signed([start, {"kind": "collected", "ids": ["t.py::a"], "found": "t.py::a"}, test, end]), key)
    assert bad.problem == "a malformed collected record"


# A P2P test that passes in the whole suite's order and fails in a subset's: test_a.py leaves a
# global set, test_b.py sets it back, test_c.py needs it unset (mpmath's test_matrix_basic after
# a doctest that sets `mp.pretty = True`). test_b.py neither runs `digit_score` nor imports
# orderlib.core, so a change-scoped gold run of a `digit_score` deletion leaves it out.
ORDERED = {
    "pyproject.toml": ('[project]\nname = "orderlib"\nversion = "0.1"\n'
                       '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'),
    "orderlib/__init__.py": "",
    "orderlib/state.py": "STATE = {'pretty': False}\n",
    "orderlib/core.py": ("def digit_score(n):\n    \"\"\"The digits' squares, summed, plus how many there are.\"\"\"\n"
                         "    digits = [int(c) for c in str(abs(n))]\n"
                         "    return sum(d * d for d in digits) + len(digits)\n"),
    "tests/test_a.py": ("from orderlib.core import digit_score\nfrom orderlib.state import STATE\n\n\n"
                        "def test_digit_score():\n    out = digit_score(17)\n    assert (type(out), out) == (int, 52)\n\n\n"
                        "def test_goes_pretty():\n    STATE['pretty'] = True\n"),
    "tests/test_b.py": "from orderlib import state\n\n\ndef test_plain_again():\n    state.STATE['pretty'] = False\n",
    "tests/test_c.py": ("import orderlib.core\nfrom orderlib.state import STATE\n\n\n"
                        "def test_is_plain():\n    assert STATE['pretty'] is False\n"),
}


def test_a_p2p_test_that_fails_only_in_a_subset_order_does_not_reject_the_gold_patch(tmp_path_factory, featdel_cache,
                                                                                     local_backend, monkeypatch):
    """The change-scoped gold run (no sample) takes test_a.py and test_c.py, not test_b.py, so
    test_is_plain fails there; the whole suite, which a learner is graded on, passes. The gold
    run is taken again over the whole P2P, and the verdict is that of whole-suite verification."""
    from featdel.pipeline import gates

    ctx = RepoContext.load(*mine_tiny(tmp_path_factory, "orderlib", ORDERED, local_backend))
    deletion = _deleted(ctx, tmp_path_factory.mktemp("orderlib-orig"), "orderlib/core.py", "digit_score", 4,
                        ["tests/test_a.py::test_digit_score"])
    scopes: list[tuple[str, ...] | None] = []
    real = gates.grade

    def watched(task, patch, backend, **kw):
        if patch:
            scopes.append(task.run_p2p)
        return real(task, patch, backend, **kw)

    monkeypatch.setattr(gates, "grade", watched)
    scoped = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=2, p2p_sample=0))
    whole = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=2, full_suite=True))
    assert scopes[0] == ("tests/test_a.py::test_goes_pretty", "tests/test_c.py::test_is_plain"), scopes
    assert scopes[1:] == [None, None], scopes  # scoped: taken again over the whole P2P; whole: always
    assert scoped.status == whole.status == VerdictStatus.VERIFIED, (scoped, whole)
    assert scoped.FAIL_TO_PASS == whole.FAIL_TO_PASS == ["tests/test_a.py::test_digit_score"]
    assert scoped.PASS_TO_PASS == whole.PASS_TO_PASS


# A class whose tests share what `setup_class` built with the library's code: coverage ties the
# code to the first test only (the setup runs in its setup phase), yet every test of the class
# fails without it (networkx's TestInternetASTopology).
SHARED = {
    "pyproject.toml": ('[project]\nname = "setuplib"\nversion = "0.1"\n'
                       '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'),
    "setuplib/__init__.py": "",
    "setuplib/core.py": ("def squares_table(n):\n    \"\"\"Each k below n mapped to its square, as text.\"\"\"\n"
                         "    pairs = [(k, str(k * k)) for k in range(n)]\n    return dict(pairs)\n\n\n"
                         "def halve(n):\n    return n // 2\n"),
    "tests/test_table.py": ("from setuplib.core import squares_table\n\n\n"
                            "class TestTable:\n"
                            "    @classmethod\n    def setup_class(cls):\n        cls.table = squares_table(4)\n\n"
                            "    def test_size(self):\n        assert len(self.table) == 4\n\n"
                            "    def test_keys(self):\n        assert sorted(self.table) == [0, 1, 2, 3]\n\n"
                            "    def test_text(self):\n        assert self.table[3] == '9'\n"),
    "tests/test_halve.py": ("from setuplib.core import halve\n\n\n"
                            "def test_halve():\n    assert halve(9) == 4\n\n\ndef test_halve_even():\n    assert halve(8) == 4\n"),
}


def test_tests_that_share_a_class_setup_with_a_tied_test_are_selected_with_it(tmp_path_factory, featdel_cache,
                                                                              local_backend):
    """The coverage map says which tests reached the code in their setup phase; their files'
    tests join the selection, so change-scoped and whole-suite verification agree on F2P (before,
    change-scoped F2P held test_size alone and P2P the two tests the start state fails)."""
    ctx = RepoContext.load(*mine_tiny(tmp_path_factory, "setuplib", SHARED, local_backend))
    [table] = [s for s in ctx.cmap.symbols if s.qualname == "squares_table"]
    assert (table.tests, table.in_setup) == (["tests/test_table.py::TestTable::test_size"],) * 2
    [halve] = [s for s in ctx.cmap.symbols if s.qualname == "halve"]
    assert len(halve.tests) == 2 and halve.in_setup == []  # reached in the test's call, not its setup
    deletion = _deleted(ctx, tmp_path_factory.mktemp("setuplib-orig"), "setuplib/core.py", "squares_table", 4,
                        table.tests)
    scoped = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=2, p2p_sample=0))
    whole = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=2, full_suite=True))
    assert scoped.status == whole.status == VerdictStatus.VERIFIED, (scoped, whole)
    assert scoped.FAIL_TO_PASS == whole.FAIL_TO_PASS == [f"tests/test_table.py::TestTable::{t}"
                                                         for t in ("test_keys", "test_size", "test_text")]
    assert scoped.PASS_TO_PASS == whole.PASS_TO_PASS


# A module only its own test file imports (idna's compat.py): removing it leaves that test module
# unimportable, while the other tests of the run pass on the start state.
COMPAT = {
    "pyproject.toml": ('[project]\nname = "compatlib"\nversion = "0.1"\n'
                       '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'),
    "compatlib/__init__.py": "from compatlib.core import encode\n",
    "compatlib/core.py": "def encode(s):\n    return s.strip().lower().encode('ascii')\n",
    "compatlib/compat.py": ("from compatlib.core import encode\n\n\n"
                            "def to_ascii(label):\n    return encode(label) + b'.'\n"),
    "tests/test_core.py": ("import unittest\n\nimport compatlib\n\n\n"
                           "def test_encode():\n    assert compatlib.encode(' Ab ') == b'ab'\n\n\n"
                           "def test_encode_empty():\n    assert compatlib.encode('') == b''\n\n\n"
                           "class Conformance(unittest.TestCase):\n"
                           "    def runTest(self):\n        self.assertEqual(compatlib.encode('X'), b'x')\n"),
    "tests/test_compat.py": ("import compatlib.compat\n\n\n"
                             "def test_to_ascii():\n    assert compatlib.compat.to_ascii('Ab') == b'ab.'\n\n\n"
                             "def test_to_ascii_strips():\n    assert compatlib.compat.to_ascii(' c ') == b'c.'\n"),
}


def test_removing_a_module_fails_only_the_tests_that_import_it(tmp_path_factory, featdel_cache, local_backend):
    """pytest given a node id it cannot collect runs nothing (exit 4): the deleted tree's runs
    asked for test_compat.py's ids beside the rest, and every test of the run became F2P (idna
    3.10: 29 tests that pass on the start state, then a `runTest` twin no collector takes made
    the gold run miss them all). The unimportable module's tests are now left out of those runs."""
    ctx = RepoContext.load(*mine_tiny(tmp_path_factory, "compatlib", COMPAT, local_backend))
    deletion = _deleted(ctx, tmp_path_factory.mktemp("compatlib-orig"), "compatlib/compat.py", "", 5,
                        ["tests/test_compat.py::test_to_ascii"], kind="file", strategy="file")
    verdict = verify_one(ctx, deletion, local_backend, VerifyOptions(reruns=2, p2p_sample=10))
    assert verdict.status == VerdictStatus.VERIFIED, verdict.reason
    assert verdict.FAIL_TO_PASS == ["tests/test_compat.py::test_to_ascii", "tests/test_compat.py::test_to_ascii_strips"]
    assert {"tests/test_core.py::test_encode", "tests/test_core.py::Conformance::runTest"} <= set(verdict.PASS_TO_PASS)

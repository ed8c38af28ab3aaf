"""The grader: one task and one patch in, one `GradeResult` out. Used by `featdel evaluate`
and by verification's gold and no-op rules, so generation and evaluation cannot drift apart.

In: a `GradeTask` (the environment, the original snapshot, the deletion, the test lists) and a
unified diff. Out: a `GradeResult` with a status, a reward and per-test outcomes; with `out_dir`
also a folder that explains the verdict (the patch, what was carried, the test output, the
report). Steps:
  1. The patch is applied to a scratch copy of the start state (`git apply`); if it does not
     apply, `patch_failed`.
  2. Only its edits to non-test source files are carried onto a pristine start state: tests,
     every `conftest.py`, pytest settings, `sitecustomize`/`usercustomize`, `.pth` files,
     symlinks and bytecode come from the task. Then the task's `test_patch` is applied.
  3. The carried lines are scanned for tampering (featdel.tamper): findings make it `suspect`.
  4. The F2P tests and the whole stable passing baseline (P2P) run in the sandbox; the report
     is cross-checked against pytest's exit status and the collected ids. A missing, skipped or
     uncollected test fails.
`broken` is only what fails without the patch: when a patched run leaves no report, the
unpatched start state is run too, and only if that also fails is the sandbox to blame.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from featdel import tamper, trees
from featdel.envs import Env
from featdel.errors import SandboxError
from featdel.spans import is_doctest, is_test_path

# Files whose content always comes from the task, whatever the patch does to them.
PROTECTED_NAMES = frozenset({"conftest.py", "pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini",
                             "setup.py", ".coveragerc", "sitecustomize.py", "usercustomize.py"})
MAX_PATCH_BYTES = 8 << 20
MAX_IDS_ON_COMMAND_LINE = 3000  # beyond this, run the whole suite and read the tests we need


class GradeStatus(StrEnum):
    RESOLVED = "resolved"  # every F2P and P2P test passed: reward 1
    UNRESOLVED = "unresolved"  # the tests ran and some failed (or the run crashed, hung, lied)
    PATCH_FAILED = "patch_failed"  # the patch does not apply (or is not a usable prediction)
    SUSPECT = "suspect"  # the patch's added lines look like tampering with the grader
    BROKEN = "broken"  # the sandbox or environment broke without the patch's help


@dataclass(frozen=True, kw_only=True, slots=True)
class GradeTask:
    instance_id: str
    env: Env
    snapshot: Path  # the original tree, tar.gz
    deletion_patch: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    test_patch: str = ""
    gold_patch: str = ""  # the lines it adds are never tampering
    image: str | None = None  # docker backend
    timeout_s: float = 600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class GradeResult:
    instance_id: str
    status: GradeStatus
    reward: float
    reason: str = ""
    model_name_or_path: str = ""
    fail_to_pass: dict[str, str] = field(default_factory=dict)  # test -> outcome
    pass_to_pass: dict[str, str] = field(default_factory=dict)
    carried: list[str] = field(default_factory=list)  # paths whose edits were graded
    ignored: list[str] = field(default_factory=list)  # paths whose edits were not (tests, config)
    findings: list[str] = field(default_factory=list)  # the tamper scan's
    seconds: float = 0.0


def protected(path: str, test_files: set[str]) -> bool:
    """Does this path's content come from the task rather than the patch?"""
    name = path.rsplit("/", 1)[-1]
    return (is_test_path(path) or path in test_files or name in PROTECTED_NAMES or name.endswith(".pth")
            or path.split("/", 1)[0] == ".git")


def grade(task: GradeTask, patch: str, backend, *, model: str = "", out_dir: Path | None = None,
          allow_suspect: bool = False, runner=None) -> GradeResult:
    """Grade `patch` against `task` in `backend`'s sandbox (see the module docstring): a fresh one
    per test run, or `runner`'s warm one (`featdel.testrun.warm_runner` for `task.env`)."""
    if runner is not None and (runner.env.src, runner.image) != (task.env.src, task.image):
        raise ValueError(f"the runner is for {runner.env.src} ({runner.image}), the task for {task.env.src}")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="featdel-grade-") as tmp:
        result, output = _grade(task, patch, backend, Path(tmp), allow_suspect, runner)
    result = dataclasses.replace(result, model_name_or_path=model, seconds=round(time.monotonic() - started, 3))
    if out_dir is not None:
        _explain(out_dir, patch, result, output)
    return result


def _grade(task: GradeTask, patch: str, backend, tmp: Path, allow_suspect: bool,
           runner) -> tuple[GradeResult, dict]:
    base = dict(instance_id=task.instance_id)
    if len(patch.encode()) > MAX_PATCH_BYTES:
        return GradeResult(**base, status=GradeStatus.PATCH_FAILED, reward=0.0,
                           reason=f"the patch is over {MAX_PATCH_BYTES >> 20} MiB"), {}
    start = trees.start_state(task.snapshot, task.deletion_patch, tmp / "start")
    learner = trees.copy_tree(start, tmp / "learner")
    if patch.strip():
        try:
            trees.apply_patch(learner, patch)
        except trees.PatchError as exc:
            return GradeResult(**base, status=GradeStatus.PATCH_FAILED, reward=0.0,
                               reason=f"the patch does not apply: {exc}"), {}
    # files that hold tests come from the task; a source module is not one for holding doctests
    # (the patch must be able to edit it: verify keeps doctests out of FAIL_TO_PASS for that)
    test_files = {t.split("::", 1)[0] for t in task.fail_to_pass + task.pass_to_pass if not is_doctest(t)}
    changes = trees.changed_files(start, learner)
    carried = sorted(p for p in changes if not protected(p, test_files) and trees.plain_path(learner, p)
                     and trees.plain_path(start, p))
    ignored = sorted(set(changes) - set(carried))
    graded = start  # the pristine start state, from here on the tree that is tested
    texts = {}
    for rel in carried:
        texts[rel] = tuple((t / rel).read_bytes() if (t / rel).is_file() else None for t in (start, learner))
        trees.copy_path(learner, graded, rel)
    if task.test_patch:
        trees.apply_patch(graded, task.test_patch)
    trees.scrub(graded)
    base.update(carried=carried, ignored=ignored)
    findings = tamper.scan(texts, task.gold_patch)
    if findings and not allow_suspect:
        return GradeResult(**base, status=GradeStatus.SUSPECT, reward=0.0, findings=findings,
                           reason=f"{len(findings)} tamper findings, e.g. {findings[0]}"), {}
    guarded = {rel: trees.digest(graded, rel) for rel in trees.files(graded) if protected(rel, test_files)}
    try:
        run = _run(task, graded, backend, runner)
    except SandboxError as exc:
        return GradeResult(**base, status=GradeStatus.BROKEN, reward=0.0, findings=findings,
                           reason=f"sandbox: {exc}"), {}
    output = {"run": dataclasses.asdict(run)}
    f2p = {t: _outcome(run, t) for t in task.fail_to_pass}
    p2p = {t: _outcome(run, t) for t in task.pass_to_pass}
    base.update(fail_to_pass=f2p, pass_to_pass=p2p, findings=findings)
    # Code under test can rewrite a test file before pytest collects it: the tests that ran must
    # be the task's, so a protected file that changed during the run voids it.
    touched = [rel for rel, digest in guarded.items() if trees.digest(graded, rel) != digest]
    why = (f"the test run changed {len(touched)} protected files, e.g. {touched[0]}" if touched
           else _unresolved_because(task, run, f2p, p2p))
    if why is None:
        return GradeResult(**base, status=GradeStatus.RESOLVED, reward=1.0), output
    if run.broken and not run.timed_out:
        # No report with the patch: the patch's fault unless the task alone fails the same way.
        clean = trees.start_state(task.snapshot, task.deletion_patch, tmp / "clean")
        if task.test_patch:
            trees.apply_patch(clean, task.test_patch)
        try:
            unpatched = _run(task, clean, backend, runner)
        except SandboxError as exc:
            unpatched = None
            why = f"sandbox: {exc}"
        if unpatched is None or unpatched.broken:
            return GradeResult(**base, status=GradeStatus.BROKEN, reward=0.0,
                               reason=f"without the patch too: {unpatched.broken if unpatched else why}"), output
    return GradeResult(**base, status=GradeStatus.UNRESOLVED, reward=0.0, reason=why), output


def _run(task: GradeTask, tree: Path, backend, runner):
    from featdel.testrun import RunOptions, run_suite

    wanted = task.fail_to_pass + task.pass_to_pass
    tests = wanted if len(wanted) <= MAX_IDS_ON_COMMAND_LINE else None
    if runner is not None:  # it hands the tree back holding what the run left, as a fresh sandbox would
        return runner.run_suite(RunOptions(tests=tests, timeout_s=task.timeout_s), tree=tree)
    return run_suite(task.env, backend, RunOptions(tests=tests, timeout_s=task.timeout_s), tree=tree,
                     image=task.image)


def _outcome(run, test: str) -> str:
    if test not in run.collected:
        return "missing"
    return run.outcomes.get(test, "missing")


def _unresolved_because(task: GradeTask, run, f2p: dict[str, str], p2p: dict[str, str]) -> str | None:
    """None when the run earns the reward; otherwise the first reason it does not."""
    if run.timed_out:
        return f"the tests did not finish within {task.timeout_s:.0f}s"
    if run.broken:
        return f"the test run left no usable report: {run.broken}"
    if run.report_exitstatus != run.exit_code:
        return f"the report says pytest exited {run.report_exitstatus}, the process exited {run.exit_code}"
    by_ids = len(f2p) + len(p2p) <= MAX_IDS_ON_COMMAND_LINE
    for kind, outcomes in (("FAIL_TO_PASS", f2p), ("PASS_TO_PASS", p2p)):
        bad = [t for t, o in outcomes.items() if o != "passed"]
        if bad:
            return f"{len(bad)} of {len(outcomes)} {kind} tests did not pass, e.g. {bad[0]} ({outcomes[bad[0]]})"
    if by_ids and run.exit_code != 0:
        return f"every test passed but pytest exited {run.exit_code}"
    return None


def _explain(out_dir: Path, patch: str, result: GradeResult, output: dict) -> None:
    """The per-instance folder: enough to audit the verdict afterwards."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "model.patch").write_text(patch)
    run = output.get("run") or {}
    (out_dir / "test_output.txt").write_text(run.get("output_tail", ""))
    report = {k: run[k] for k in ("outcomes", "collected", "collect_errors", "exit_code", "report_exitstatus",
                                  "timed_out", "broken", "seconds") if k in run}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    tmp = out_dir / "result.json.tmp"
    tmp.write_text(json.dumps(dataclasses.asdict(result), indent=1, sort_keys=True))
    os.replace(tmp, out_dir / "result.json")


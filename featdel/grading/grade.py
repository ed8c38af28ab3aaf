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
  3. The carried lines are scanned for tampering (featdel.grading.tamper): findings make it `suspect`.
  4. The F2P tests and the whole stable passing baseline (P2P) run in the sandbox with the
     canaries (featdel.grading.canaries) beside the F2P tests; the report is cross-checked
     against pytest's exit status and the collected ids. A missing, skipped or uncollected test
     fails. First, the reference (the start state with the gold patch) runs on copies of the F2P
     tests with one input changed (featdel.grading.held_out; JavaScript's:
     featdel.lang.javascript.held_out), and what it computes is what the held-out variants
     planted in the graded tree expect: a patch that fails one is unresolved.
`broken` is only what fails without the patch: when a patched run leaves no report, the
unpatched start state is run too, and only if that also fails is the sandbox to blame.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from featdel.code import starts, trees
from featdel.code.literals import HELD_OUT
from featdel.code.spans import is_doctest, is_test_path
from featdel.core.errors import SandboxError
from featdel.env.envs import Env
from featdel.grading import canaries, tamper
from featdel.grading.held_out import capture as capture_held_out
# Files whose content always comes from the task (every pytest config name, start-up hooks), and
# folders describing installed distributions: Python's, kept with its language.
from featdel.lang import language as lang_of
from featdel.lang.python import PROTECTED_NAMES, PROTECTED_SUFFIXES

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
    # The P2P tests this grading runs; None: all of `pass_to_pass`. Only verification's
    # change-scoped no-op and gold gates set it (a learner is always graded on every P2P test).
    # Which files are protected still follows the whole lists.
    run_p2p: tuple[str, ...] | None = None
    language: str = "python"  # the task's (featdel.lang): its runner, protected files and tamper patterns

    def p2p_to_run(self) -> list[str]:
        return list(self.pass_to_pass if self.run_p2p is None else self.run_p2p)


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


def files_of_tests(test_ids) -> set[str]:
    """The files that hold `test_ids`: they come from the task, never from a patch. A source
    module is not one for holding doctests: the patch must be able to edit it (verify keeps
    doctests out of FAIL_TO_PASS for that). Every grader of a task (this one, the exported
    SWE-bench and Harbor scripts) restores exactly these."""
    return {t.split("::", 1)[0] for t in test_ids if not is_doctest(t)}


def protected(path: str, test_files: set[str], language: str = "python") -> bool:
    """Does this path's content come from the task rather than the patch? A path beneath a
    protected one (`pyproject.toml/keep.py`, `x.dist-info/entry_points.txt`) is protected too.
    Another language adds its own: for JavaScript its test files, runner and transpiler
    configuration (`jest.config.*`, `vitest.config.*`, `.mocharc*`, `tsconfig*.json`),
    package.json (its scripts name the test command), lockfiles, and anything under a
    node_modules folder, where node would look first for a module the tests load."""
    parts = path.split("/")
    if is_test_path(path):
        return True
    other = None if language == "python" else lang_of(language)
    if other is not None and (other.is_test_path(path) or "node_modules" in parts):
        return True
    for i in range(1, len(parts) + 1):
        prefix, name = "/".join(parts[:i]), parts[i - 1]
        if (prefix in test_files or name in PROTECTED_NAMES or name.endswith(".pth") or name == ".git"
                or name.endswith(PROTECTED_SUFFIXES) or (other is not None and other.is_protected_name(name))):
            return True
    return False


def grade(task: GradeTask, patch: str, backend, *, model: str = "", out_dir: Path | None = None,
          allow_suspect: bool = False, runner=None, held_out: bool = True,
          bytecode: dict[str, bytes] | None = None, tracebacks: bool | None = None) -> GradeResult:
    """Grade `patch` against `task` in `backend`'s sandbox (see the module docstring): a fresh one
    per test run, or `runner`'s warm one (`featdel.env.testrun.warm_runner` for `task.env`).
    `held_out=False` leaves out the held-out variants and the reference run they need (for
    bench/held_out.py, which measures what they cost and catch). `bytecode`: the original's
    compiled files (featdel.env.bytecode), laid beside the graded tree's files that neither the
    deletion, the patch, the test patch nor a canary changed; verification's no-op and gold
    runs pass them, a learner's grading does not. `tracebacks`: pytest's traceback of each
    failure in the test output; default: only when `out_dir` will show that output (an RL
    episode's grading and verification's runs read outcomes alone, and a traceback per failing
    test is most of a failing run's time)."""
    if runner is not None and (runner.env.src, runner.image) != (task.env.src, task.image):
        raise ValueError(f"the runner is for {runner.env.src} ({runner.image}), the task for {task.env.src}")
    started = time.monotonic()
    tracebacks = out_dir is not None if tracebacks is None else tracebacks
    try:
        patch.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate from JSON: no diff is made of that
        return GradeResult(instance_id=task.instance_id, status=GradeStatus.PATCH_FAILED, reward=0.0,
                           model_name_or_path=model, reason=f"the patch is not valid Unicode text: {exc}")
    tmp = tempfile.mkdtemp(prefix="featdel-grade-")
    try:
        try:
            result, output = _grade(task, patch, backend, Path(tmp), allow_suspect, runner, held_out, bytecode,
                                    tracebacks)
        except Exception as exc:
            if not patch.strip():
                raise  # featdel's own failure on the start state: the caller records it as broken
            # Whatever follows from carrying and running the patch is the patch's failure when
            # the start state alone grades without it (`broken` is only what fails without it).
            _clear(Path(tmp))
            _grade(task, "", backend, Path(tmp) / "unpatched", False, runner, False)
            result, output = GradeResult(instance_id=task.instance_id, status=GradeStatus.UNRESOLVED, reward=0.0,
                                         reason=f"grading this patch failed: {type(exc).__name__}: {str(exc)[:200]}"), {}
    finally:
        _remove(Path(tmp))
    result = dataclasses.replace(result, model_name_or_path=model, seconds=round(time.monotonic() - started, 3))
    if out_dir is not None:
        _explain(out_dir, patch, result, output)
    return result


def _grade(task: GradeTask, patch: str, backend, tmp: Path, allow_suspect: bool,
           runner, held_out: bool = True, bytecode: dict[str, bytes] | None = None,
           tracebacks: bool = True) -> tuple[GradeResult, dict]:
    base = dict(instance_id=task.instance_id)
    if len(patch.encode()) > MAX_PATCH_BYTES:
        return GradeResult(**base, status=GradeStatus.PATCH_FAILED, reward=0.0,
                           reason=f"the patch is over {MAX_PATCH_BYTES >> 20} MiB"), {}
    start = starts.start_state(task.snapshot, task.deletion_patch, tmp / "start")
    learner = trees.copy_tree(start, tmp / "learner")
    if patch.strip():
        try:
            trees.apply_patch(learner, patch)
        except trees.PatchError as exc:
            return GradeResult(**base, status=GradeStatus.PATCH_FAILED, reward=0.0,
                               reason=f"the patch does not apply: {exc}"), {}
    test_files = files_of_tests(task.fail_to_pass + task.pass_to_pass)
    changes = trees.changed_files(start, learner)
    carried = sorted(p for p in changes if not protected(p, test_files, task.language) and trees.plain_path(learner, p)
                     and trees.plain_path(start, p))
    ignored = sorted(set(changes) - set(carried))
    graded = start  # the pristine start state, from here on the tree that is tested
    texts = {}
    try:
        for rel in carried:
            texts[rel] = tuple((t / rel).read_bytes() if (t / rel).is_file() else None for t in (start, learner))
            trees.copy_path(learner, graded, rel)
    except OSError as exc:  # e.g. a file where the start state has a folder: the patch's doing
        return GradeResult(**base, status=GradeStatus.PATCH_FAILED, reward=0.0,
                           reason=f"the patch's files cannot be laid over the start state: {exc}"), {}
    if task.test_patch:
        trees.apply_patch(graded, task.test_patch)
    trees.scrub(graded)
    base.update(carried=carried, ignored=ignored)
    findings = tamper.scan(texts, task.gold_patch, patterns=scan_patterns(task.language))
    if findings and not allow_suspect:
        return GradeResult(**base, status=GradeStatus.SUSPECT, reward=0.0, findings=findings,
                           reason=f"{len(findings)} tamper findings, e.g. {findings[0]}"), {}
    held = _held_out(task, backend, runner, tmp) if held_out and patch.strip() else []
    planted = canaries.plant(graded, task.fail_to_pass, language=task.language, env=task.env, held=held)
    if bytecode:
        from featdel.env.bytecode import overlay

        overlay(graded, bytecode, set(carried) | trees.patched_files(task.deletion_patch)
                | trees.patched_files(task.test_patch) | {c.node_id.split("::")[0] for c in planted})
    guarded = {rel: trees.digest(graded, rel) for rel in trees.files(graded) if protected(rel, test_files, task.language)}
    added = added_lines(texts, task.gold_patch)
    try:
        run = _run(task, graded, backend, runner, [c.node_id for c in planted], added, tracebacks)
    except SandboxError as exc:
        run = None
        why = f"sandbox: {exc}"
    if run is None:
        return _without_patch(task, backend, runner, tmp, base, why, {})
    output = {"run": dataclasses.asdict(run), "canaries": [dataclasses.asdict(c) for c in planted]}
    f2p = {t: _outcome(run, t) for t in task.fail_to_pass}
    p2p = {t: _outcome(run, t) for t in task.p2p_to_run()}
    base.update(fail_to_pass=f2p, pass_to_pass=p2p)
    # Code under test can rewrite a test file before pytest collects it: the tests that ran must
    # be the task's, so a protected file that changed during the run voids it.
    touched = [rel for rel, digest in guarded.items() if trees.digest(graded, rel) != digest]
    why = (f"the test run changed {len(touched)} protected files, e.g. {touched[0]}" if touched
           else _unresolved_because(task, run, f2p, p2p, expected_exit=1 if planted else 0))
    # What the run itself saw (tripwires, a forged stream, a wrong canary) voids it whatever the
    # scan said: --allow-suspect lets findings through, never run-time evidence.
    outcomes = {t: _outcome(run, t) for t in [c.node_id for c in planted] + task.fail_to_pass}
    evidence = run.trips + [w for c in planted if (w := c.wrong(outcomes, why is None))]
    if evidence and not (run.broken and not run.trips):
        return GradeResult(**base, status=GradeStatus.SUSPECT, reward=0.0, findings=findings + evidence,
                           reason=f"the test run was tampered with: {evidence[0]}"), output
    base.update(findings=findings)
    missed = [c for c in planted if c.kind == "held_out" and outcomes.get(c.node_id) != "passed"]
    if why is None and missed:
        why = (f"{len(missed)} of {sum(c.kind == 'held_out' for c in planted)} held-out variants of the F2P tests "
               f"(an input changed, the reference's answer expected) did not pass, e.g. {missed[0].node_id} "
               f"({outcomes.get(missed[0].node_id)})")
    if why is None:
        return GradeResult(**base, status=GradeStatus.RESOLVED, reward=1.0), output
    if run.broken and not run.timed_out:
        return _without_patch(task, backend, runner, tmp, base, why, output)
    return GradeResult(**base, status=GradeStatus.UNRESOLVED, reward=0.0, reason=why), output


def _held_out(task: GradeTask, backend, runner, tmp: Path) -> list:
    """Up to HELD_OUT of the held-out entries the reference recorded for this task, drawn anew
    for each grading (`_reference_answers`)."""
    found = _reference_answers(task, backend, runner, tmp)
    return secrets.SystemRandom().sample(found, min(HELD_OUT, len(found)))


# (instance, snapshot, deletion, gold, test patch) -> the reference's answers: a process grades
# many patches of one task (a batch of predictions, an RL group), and the reference's answers do
# not depend on the patch, so its run is made once per task and process. Bounded: oldest out.
_ANSWERS: dict[tuple, list] = {}
_ANSWERS_KEPT = 256


def _reference_answers(task: GradeTask, backend, runner, tmp: Path) -> list:
    """What the reference computes for the held-out variants of the F2P tests (the language's
    `capture_held_out`, run on the start state with the gold patch): [] where the language has
    none, the task has no gold patch, or that run gives nothing (it cannot void the grading)."""
    from featdel.env.testrun import RunOptions

    if not task.gold_patch.strip():
        return []
    key = (task.instance_id, str(task.snapshot), task.deletion_patch, task.gold_patch, task.test_patch, task.image)
    if key in _ANSWERS:
        return _ANSWERS[key]
    reference = starts.start_state(task.snapshot, task.deletion_patch, tmp / "reference")
    try:
        trees.apply_patch(reference, task.gold_patch)
        if task.test_patch:
            trees.apply_patch(reference, task.test_patch)
    except trees.PatchError:
        return []
    trees.scrub(reference)
    if task.language == "python":  # the grader's own, as its canaries are
        found = capture_held_out(reference, task.fail_to_pass, task.env.src)
    else:
        found = lang_of(task.language).capture_held_out(reference, task.fail_to_pass, task.env)
    if found is None:
        return []
    # only the recorded answers are read: a failing copy in one line
    options = RunOptions(tests=found.ids, timeout_s=task.timeout_s, extra_args=list(lang_of(task.language).quiet_args))
    try:
        run = runner.run_suite(options, tree=reference) if runner is not None else run_tests(task, reference, backend, options)
    except SandboxError:
        return []  # not kept: the next grading tries again
    if run.broken:
        return []
    if len(_ANSWERS) >= _ANSWERS_KEPT:
        del _ANSWERS[next(iter(_ANSWERS))]
    _ANSWERS[key] = found.values(reference, run.outcomes)
    return _ANSWERS[key]


def _without_patch(task: GradeTask, backend, runner, tmp: Path, base: dict, why: str,
                   output: dict) -> tuple[GradeResult, dict]:
    """The patched run broke (no complete report, or the sandbox failed): the patch's fault,
    `unresolved`, unless the unpatched start state breaks too, which alone is `broken`."""
    _clear(tmp)
    try:
        clean = starts.start_state(task.snapshot, task.deletion_patch, tmp / "clean")
        if task.test_patch:
            trees.apply_patch(clean, task.test_patch)
        unpatched = _run(task, clean, backend, runner)
        failed = unpatched.broken
    except SandboxError as exc:
        failed = f"sandbox: {exc}"
    if failed:
        return GradeResult(**base, status=GradeStatus.BROKEN, reward=0.0, reason=f"without the patch too: {failed}"), output
    return GradeResult(**base, status=GradeStatus.UNRESOLVED, reward=0.0, reason=why), output


def _clear(tmp: Path) -> None:
    """Remove the patched run's trees and whatever it wrote in them before the start state runs
    alone: a patch that filled the disk from inside its run (an outside red team's
    `posix_fallocate`, then the report channel closed) must fail its own grading, not the
    unpatched run that decides `broken`. Folders the run made unreadable are opened first."""
    for child in list(tmp.iterdir()) if tmp.is_dir() else []:
        _remove(child)


def _remove(path: Path) -> None:
    """Remove `path`, whatever the run left in it: folders it made unreadable are opened, and a
    tree too deep for `shutil.rmtree`'s recursion (a third outside red team's 4,000 nested folders
    made grade() raise RecursionError: `broken`) goes to `rm -rf`, which does not recurse."""
    def reopen(func, name, _exc):
        try:
            os.chmod(os.path.dirname(name), 0o700)
            if not os.path.islink(name):
                os.chmod(name, 0o700)
            func(name)
        except OSError:
            pass

    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    try:
        shutil.rmtree(path, onerror=reopen)
    except RecursionError:
        pass
    if os.path.lexists(path):
        subprocess.run(["chmod", "-R", "u+rwx", str(path)], capture_output=True)
        subprocess.run(["rm", "-rf", "--one-file-system", str(path)], capture_output=True)


def added_lines(texts: dict[str, tuple[bytes | None, bytes | None]], gold_patch: str) -> dict[str, list[int]]:
    """path -> the line numbers of the lines a patch adds to each carried file, less lines the
    start state or the gold patch holds (the tripwire's attribution, as the scan's). Every file,
    not only `.py` ones: code compiled from a data file runs under that file's name (an outside
    red team's oracle sat in a `.txt`, compiled by `py_compile`)."""
    gold = {ln[1:].strip() for ln in gold_patch.splitlines() if ln.startswith("+") and not ln.startswith("+++")}
    out = {}
    for rel, (old, new) in texts.items():
        if new is None:
            continue
        old_lines = (old or b"").decode("utf-8", "replace").splitlines()
        new_lines = new.decode("utf-8", "replace").splitlines()
        known = {ln.strip() for ln in old_lines} | gold
        matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
        numbers = [j + 1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert")
                   for j in range(j1, j2) if new_lines[j].strip() not in known]
        if numbers:
            out[rel] = numbers
    return out


def scan_patterns(language: str) -> dict:
    """file suffixes -> the tamper patterns of the task's language (none for Python, whose scan
    reads its syntax tree): every carried file of the task, whatever its name, since node and
    vite run a file of any suffix that a literal `require` or `import` names as code."""
    lang = lang_of(language)
    return {("",): lang.tamper_patterns} if lang.tamper_patterns else {}


def _run(task: GradeTask, tree: Path, backend, runner, extra: list[str] = (), added: dict | None = None,
         tracebacks: bool = True):
    from featdel.env.testrun import RunOptions

    wanted = task.fail_to_pass + task.p2p_to_run()
    tests = wanted + list(extra) if len(wanted) <= MAX_IDS_ON_COMMAND_LINE else None
    watch = watched_files(task, tree)
    quiet = [] if tracebacks else list(lang_of(task.language).quiet_args)
    options = RunOptions(tests=tests, timeout_s=task.timeout_s, added=added or None, watch=watch, extra_args=quiet)
    if runner is not None:  # it hands the tree back holding what the run left, as a fresh sandbox would
        return runner.run_suite(options, tree=tree)
    return run_tests(task, tree, backend, options)


def watched_files(task: GradeTask, tree: Path) -> list[str]:
    """The test files whose collected functions the run checks, and whose reads it watches: those
    of the F2P tests, and for Python the test files they import (a test class may inherit its
    tests from another file's class)."""
    from featdel.code.imports import imported_test_files

    own = {t.split("::", 1)[0] for t in task.fail_to_pass if not is_doctest(t)}
    return sorted(own | imported_test_files(tree, own)) if task.language == "python" else sorted(own)


def run_tests(task: GradeTask, tree: Path, backend, options):
    """One run of `task`'s suite on `tree` in a fresh sandbox, through the runner of the task's
    language (pytest's for Python, node's launcher for JavaScript): the grader's and the
    learner's `run_tests` tool's (featdel.agent.workspace)."""
    from featdel.env.testrun import run_suite

    if task.language != "python":
        return lang_of(task.language).runner(task.env, backend, image=task.image, warm=False).run_suite(options, tree=tree)
    return run_suite(task.env, backend, options, tree=tree, image=task.image)


def _outcome(run, test: str) -> str:
    if test not in run.collected:
        return "missing"
    return run.outcomes.get(test, "missing")


def _unresolved_because(task: GradeTask, run, f2p: dict[str, str], p2p: dict[str, str],
                        expected_exit: int = 0) -> str | None:
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
    if by_ids and run.exit_code != expected_exit:  # 1: the canaries that must fail did
        return f"every test passed but pytest exited {run.exit_code} (expected {expected_exit})"
    return None


def _explain(out_dir: Path, patch: str, result: GradeResult, output: dict) -> None:
    """The per-instance folder: enough to audit the verdict afterwards."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "model.patch").write_text(patch, errors="backslashreplace")
    run = output.get("run") or {}
    (out_dir / "test_output.txt").write_text(run.get("output_tail", ""), errors="backslashreplace")
    report = {k: run[k] for k in ("outcomes", "collected", "collect_errors", "exit_code", "report_exitstatus",
                                  "timed_out", "broken", "seconds") if k in run}
    (out_dir / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True))
    (out_dir / "canaries.json").write_text(json.dumps(output.get("canaries", []), indent=1))
    tmp = out_dir / "result.json.tmp"
    tmp.write_text(json.dumps(dataclasses.asdict(result), indent=1, sort_keys=True))
    os.replace(tmp, out_dir / "result.json")


"""Stage 3, verify: every rule of the validation contract, on the tree a learner will get.

In: a run directory with deletions. Out: one `Verdict` per deletion in `verdicts.jsonl`.
For each deletion, in order (the first rule that fails ends it, and the verdict names it):
  build   the start state (snapshot + `git apply deletion_patch`, scrubbed, one commit) parses,
          imports, and `pytest --collect-only` collects the baseline tests (minus deleted files).
          One exception (featdel.code.gone): a test module whose collection fails only
          because it imports a deleted name (ImportError / AttributeError naming it) is allowed,
          and its baseline-passing tests join the selected tests as F2P candidates; any other
          collection error rejects
  tests   K runs of the selected tests (with `--continue-on-collection-errors`, so an allowed
          module does not stop the others): fail-to-pass = passed at baseline, fail, error or
          not collected in every run (a skip is not a failure); F2P >= 1 (`reruns` when outcomes
          flip). The grader treats an uncollected F2P test as failed too, so noop and gold agree
  stub    tests that a stub body (`pass`, `return None`, the first argument, an object equal to
          anything: featdel.deletion.equal_stub) makes pass leave F2P; a task left with none is rejected.
          Wiring the deletion cut in other files (a re-export) comes back with the stub, so the
          stub is importable and the gate not vacuous
  similar the deleted code is not a near copy (identifier-normalised) of code the start keeps
  leak    the deleted code has a distinctive line, and none is in the start state (git objects
          decompressed), the environment, what the sandbox shows, or the problem statement
  noop    the grader, given the empty patch, fails every F2P test; P2P = the whole stable
          passing baseline but F2P (never a sample), some of which may fail in the start state
  gold    the grader, given `patch`, resolves the task (every F2P and P2P test passes)
The verdict keeps what was checked (patches, statement, start-state hash) for `package`.
`combine` deletions (verified parts joined) come after a first pass and go through every rule
again as a whole (featdel.pipeline.delete.combine_all).
"Sandbox or environment broke" ends as status `broken`, never as `rejected`.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tempfile
import traceback
import zlib
from dataclasses import dataclass
from pathlib import Path

from featdel.code import exposure, leaks, trees
from featdel.code.coverage_map import CoverageMap
from featdel.code.spans import has_syntax_error, is_doctest
from featdel.core.errors import SandboxError
from featdel.core.records import Deletion, RepoRecord, Verdict, VerdictStatus
from featdel.core.rundir import RunDir
from featdel.deletion import quality, statement
from featdel.env import envs
from featdel.env.testrun import RunOptions, SuiteRun, SuiteRunner
from featdel.grading.grade import GradeStatus, GradeTask, grade


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyOptions:
    reruns: int = 3
    p2p_sample: int = 20
    full_suite: bool = False
    timeout_s: float | None = None  # per test run; default: 10x the baseline suite, at least 60 s
    seed: int = 0
    max_similarity: float = quality.MAX_SIMILARITY
    # One sandbox per candidate, reset between its test runs; False opens one per run.
    warm_sandbox: bool = True

    def run_timeout(self, ctx: RepoContext) -> float:
        return self.timeout_s or max(60.0, 10 * ctx.record.suite_seconds)


# An allowed module that fails collection must not stop the other selected tests from running.
CONTINUE = ["--continue-on-collection-errors"]


class Broke(Exception):
    """The sandbox or environment broke while verifying: a `broken` verdict."""


class Rejected(Exception):
    def __init__(self, stage: str, reason: str):
        super().__init__(reason)
        self.stage = stage


@dataclass
class RepoContext:
    """What verifying any deletion of one repo needs, loaded once."""

    record: RepoRecord
    env: envs.Env
    snapshot: Path
    cmap: CoverageMap
    passing: list[str]  # stable passing baseline tests
    collected: set[str]
    image: str | None = None  # docker backend: the per-repo image

    @classmethod
    def load(cls, run_dir: Path, record: RepoRecord) -> RepoContext:
        rd = RunDir(run_dir)
        env = envs.load(Path(record.env_dir))
        if env is None:
            raise Broke(f"environment {record.env_dir} is missing; run `featdel mine` again")
        baseline = json.loads(rd.baseline(record.name).read_text())
        tests = baseline["tests"]
        passing = sorted(t for t, v in tests.items() if not v["flaky"] and set(v["outcomes"]) == {"passed"})
        return cls(record=record, env=env, snapshot=rd.snapshot(record.name),
                   cmap=CoverageMap.load(rd.coverage(record.name)), passing=passing, collected=set(tests),
                   image=record.image_name)


def build_check(ctx: RepoContext, tree: Path, runner: SuiteRunner, deleted_files: set[str],
                deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None) -> str | None:
    """None when the tree imports and collects the baseline tests, else the reason. Test
    modules that fail collection only by importing one of `deleted_names` are allowed (and
    added to `allowed_out`)."""
    modules = [d.removeprefix("src/").removesuffix(".py").replace("/", ".") for d in ctx.env.recipe.package_dirs]
    # The script always prints one JSON line; anything else means the interpreter or sandbox broke.
    code = (
        "import importlib, json, sys\n"
        "try:\n    [importlib.import_module(m) for m in sys.argv[1:]]\n    err = None\n"
        "except BaseException as exc:\n    err = f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]\n"
        "print('FEATDEL-IMPORT ' + json.dumps(err))"
    )
    result = runner.run([str(ctx.env.venv / "bin" / "python"), "-c", code, *modules], tree=tree,
                        env=ctx.env.environ(), timeout_s=120)
    if result.timed_out:
        return "importing the package did not finish within 120s"
    marker = [ln for ln in result.stdout.splitlines() if ln.startswith("FEATDEL-IMPORT ")]
    if not marker:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise Broke(f"the import check did not run (exit {result.exit_code}): {last[:200]}")
    error = json.loads(marker[-1].removeprefix("FEATDEL-IMPORT "))
    if error:
        return f"the package no longer imports: {error}"
    run = runner.run_suite(RunOptions(collect_only=True, timeout_s=300), tree=tree)
    if run.timed_out:
        return "collection did not finish within 300s"
    if run.broken:
        # The original tree collects in this environment, so a crash here is the edit's doing
        # (a name used at import that is gone): a reason, never a dead batch.
        return f"collection crashed: {run.broken}"
    from featdel.code.gone import allowed

    messages = {e: run.collect_messages.get(e, "") for e in run.collect_errors}
    ok, why = allowed(messages, set(deleted_names))
    if why:
        return f"collection fails: {why}"
    if allowed_out is not None:
        allowed_out |= ok
    expected = {t for t in ctx.collected if t.split("::")[0] not in deleted_files | ok}
    missing = expected - set(run.collected) - gone_doctests(expected, deleted_names)
    if missing:
        return f"{len(missing)} baseline tests are no longer collected, e.g. {sorted(missing)[0]}"
    return None


def make_check(ctx: RepoContext, backend):
    """The strategies' check: apply edits to a copy of the original, then `build_check`."""

    def factory(original: Path):
        def check(edits):
            with tempfile.TemporaryDirectory(prefix="featdel-check-") as tmp:
                tree = Path(tmp) / "t"
                shutil.copytree(original, tree, symlinks=True)
                trees.apply_edits(tree, edits)
                deleted = {p for p, text in edits.items() if text is None}
                with SuiteRunner(ctx.env, backend, image=ctx.image) as runner:
                    reason = build_check(ctx, tree, runner, deleted, removed_names(original, edits))
            return True if reason is None else reason

        return check

    return factory


def gone_doctests(tests, names: set[str]) -> set[str]:
    """The doctests among `tests` that a removed definition takes with it (`pkg.mod.Class.name`
    goes with `name`): pytest no longer collects them, and naming one on its command line would
    stop the whole run ("not found")."""
    return {t for t in tests if is_doctest(t) and t.partition("::")[2].rpartition(".")[2] in names}


def removed_names(original: Path, edits: dict[str, str | None]) -> set[str]:
    """The names an edit of the original tree removes (see featdel.code.gone)."""
    from featdel.code.gone import deleted_names
    from featdel.code.imports import module_name

    paths = {p.relative_to(original).as_posix() for p in original.rglob("*.py")}
    return deleted_names(lambda rel: (original / rel).read_bytes(), edits, lambda rel: module_name(rel, paths))


def select_tests(ctx: RepoContext, deletion: Deletion, opts: VerifyOptions,
                 unimportable: set[str] = frozenset()) -> tuple[list[str], list[str]]:
    """(tests the coverage map ties to the deleted symbols, or that sit in a test module that
    imports a deleted name, and a seeded sample of the others)."""
    deleted_files = {p for p, text in deletion.files.items() if text is None}
    refs = set(deletion.deleted_symbols)
    tied = {t for t in ctx.passing if t.split("::")[0] in unimportable}
    for s in ctx.cmap.symbols:
        if f"{s.path}::{s.qualname}" in refs or s.path in deleted_files:
            tied.update(s.tests)
    usable = [t for t in ctx.passing if t.split("::")[0] not in deleted_files]
    tied = sorted(tied & set(usable))
    others = [t for t in usable if t not in set(tied)]
    if opts.full_suite:
        return tied, others
    rng = random.Random(opts.seed ^ zlib.crc32(deletion.deletion_id.encode()))
    return tied, sorted(rng.sample(others, min(opts.p2p_sample, len(others))))


def _run(ctx: RepoContext, runner: SuiteRunner, tree: Path, tests: list[str], opts: VerifyOptions,
         spent: list[float], stage: str) -> SuiteRun:
    timeout = opts.run_timeout(ctx)
    run = runner.run_suite(RunOptions(tests=tests, timeout_s=timeout, extra_args=CONTINUE), tree=tree)
    spent.append(run.seconds)
    if run.timed_out:  # the code under test hangs (a deletion can make a loop endless): not the sandbox
        raise Rejected(stage, f"the tests did not finish within {timeout:.0f}s")
    if run.broken:
        raise Broke(run.broken)
    return run


def verify_one(ctx: RepoContext, deletion: Deletion, backend, opts: VerifyOptions) -> Verdict:
    base = dict(deletion_id=deletion.deletion_id, repo=deletion.repo, strategy=deletion.strategy,
                target=deletion.target)
    spent: list[float] = []
    try:
        with SuiteRunner(ctx.env, backend, image=ctx.image, warm=opts.warm_sandbox) as runner:
            checked = _verify(ctx, deletion, runner, opts, spent)
    except Rejected as exc:
        return Verdict(**base, status=VerdictStatus.REJECTED, stage=exc.stage, reason=str(exc), test_seconds=sum(spent))
    except (Broke, SandboxError) as exc:
        return Verdict(**base, status=VerdictStatus.BROKEN, stage="sandbox", reason=str(exc), test_seconds=sum(spent))
    except Exception as exc:  # a bug or a surprise on one candidate: recorded, the batch goes on
        return Verdict(**base, status=VerdictStatus.BROKEN, stage="crash", test_seconds=sum(spent),
                       reason=f"{type(exc).__name__}: {str(exc)[:200]}", traceback=traceback.format_exc())
    return Verdict(**base, status=VerdictStatus.VERIFIED, stage="done", FAIL_TO_PASS=checked.fail_to_pass,
                   PASS_TO_PASS=checked.pass_to_pass, test_seconds=round(sum(spent), 3), image_name=ctx.image,
                   deletion_patch=checked.deletion_patch, patch=checked.patch,
                   problem_statement=checked.problem_statement, start_sha256=checked.start_sha256,
                   similarity=checked.similarity, stub_passed=checked.stub_passed,
                   timeout_s=opts.run_timeout(ctx)).stamped()


@dataclass(frozen=True, kw_only=True, slots=True)
class Checked:
    """What verification checked, kept so that packaging ships exactly that."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    deletion_patch: str
    patch: str
    problem_statement: str
    start_sha256: str
    similarity: float
    stub_passed: list[str]  # tests a stub body passes: taken out of F2P


def grade_task(ctx: RepoContext, deletion_patch: str, patch: str, f2p: list[str], p2p: list[str],
               timeout_s: float, instance_id: str = "") -> GradeTask:
    return GradeTask(instance_id=instance_id, env=ctx.env, snapshot=ctx.snapshot, deletion_patch=deletion_patch,
                     gold_patch=patch, fail_to_pass=f2p, pass_to_pass=p2p, image=ctx.image, timeout_s=timeout_s)


def _stub_passes(ctx, deletion: Deletion, original: Path, tests: list[str], runner: SuiteRunner, opts, spent,
                 tmp: Path) -> dict[str, str]:
    """The tests among `tests` that some stub body (`pass`, `return None`, the first argument,
    an object equal to anything) makes pass, each with the first variant's label that does: a
    learner could earn them without the work. A variant runs only the tests no earlier one
    passed; once none is left the rest are not run."""
    passed: dict[str, str] = {}
    homes = {ref.partition("::")[0] for ref in deletion.deleted_symbols}
    for i, variant in enumerate(quality.stub_variants(original, deletion)):
        left = [t for t in tests if t not in passed]
        if not left:
            break
        # wiring the deletion cut elsewhere (a re-export, an `__all__` entry) comes back with the
        # stub, else the stub could never be imported and the gate would pass vacuously
        files = {p: t for p, t in variant.files.items() if p in homes or t is None}
        deletion_patch, _ = trees.diff(ctx.snapshot, files)
        tree = trees.start_state(ctx.snapshot, deletion_patch, tmp / f"stub{i}")
        run = runner.run_suite(RunOptions(tests=left, timeout_s=opts.run_timeout(ctx), extra_args=CONTINUE), tree=tree)
        spent.append(run.seconds)
        if run.broken and not run.timed_out:
            raise Broke(run.broken)
        passed |= {t: variant.label for t in sorted(run.passed() & set(left))}
    return passed


def _exposed(ctx: RepoContext, start: Path, needles: list[str], backend) -> str | None:
    """A copy of the deleted code in anything else a test run shows (featdel.code.exposure). With
    docker the system directories are the image's, not this host's: only the binds count."""
    from featdel.env.testrun import suite_readonly
    from featdel.sandboxes.base import SandboxSpec
    from featdel.sandboxes.local import visible_roots

    roots = visible_roots(SandboxSpec(workdir=start, mount_at=ctx.env.src, readonly=suite_readonly(ctx.env)))
    if getattr(backend, "name", "local") != "local":
        roots = [r for r in roots if not r.system]
    return exposure.audit(roots, needles, exposure.package_names(ctx.env.recipe.package_dirs))


def _verify(ctx, deletion: Deletion, runner: SuiteRunner, opts: VerifyOptions, spent) -> Checked:
    deletion_patch, patch = trees.diff(ctx.snapshot, deletion.files)
    deleted_files = {p for p, text in deletion.files.items() if text is None}
    with tempfile.TemporaryDirectory(prefix="featdel-verify-") as tmp:
        def fresh(name: str) -> Path:
            return trees.start_state(ctx.snapshot, deletion_patch, Path(tmp) / name)

        for path, text in sorted(deletion.files.items()):
            if text is not None and has_syntax_error(text.encode()):
                raise Rejected("build", f"{path} does not parse after the deletion")
        original = trees.extract(ctx.snapshot, Path(tmp) / "original")
        unimportable: set[str] = set()
        names = removed_names(original, deletion.files)
        reason = build_check(ctx, fresh("build"), runner, deleted_files, names, unimportable)
        if reason:
            raise Rejected("build", reason)
        tied, sample = select_tests(ctx, deletion, opts, unimportable)
        if not tied:
            raise Rejected("tests", "no passing baseline test executes the deleted code")
        gone = gone_doctests(ctx.collected, names)
        tied, sample = [t for t in tied if t not in gone], [t for t in sample if t not in gone]
        if not tied:
            raise Rejected("tests", f"only the deleted code's own doctests execute it, e.g. {sorted(gone)[0]}")
        selected = tied + sample
        runs = [_run(ctx, runner, fresh(f"run{i}"), selected, opts, spent, "tests") for i in range(opts.reruns)]
        failing = [t for t in selected if all(r.outcomes.get(t, "missing") in ("failed", "error", "missing") for r in runs)]
        if not failing:
            flipped = [t for t in tied if len({r.outcomes.get(t, "missing") for r in runs}) > 1]
            if flipped:
                raise Rejected("reruns", f"outcomes changed across {opts.reruns} runs, e.g. {flipped[0]}")
            raise Rejected("tests", f"none of the {len(tied)} tests tied to the deleted code fails")
        # A doctest's expected output sits in a source file the learner may edit (the grader
        # carries edits to it), so rewriting a docstring could pass it: never a reward.
        doctests = [t for t in failing if is_doctest(t)]
        failing = [t for t in failing if not is_doctest(t)]
        if not failing:
            raise Rejected("tests", f"only doctests fail ({len(doctests)}, e.g. {doctests[0]}); a learner could "
                                    "pass them by editing the docstring")
        stubbed = _stub_passes(ctx, deletion, original, failing, runner, opts, spent, Path(tmp))
        failing = [t for t in failing if t not in stubbed]
        if not failing:
            labels = ", ".join(sorted(set(stubbed.values()), key=quality.LABELS.index))
            raise Rejected("stub", f"a stub body ({labels}) passes all {len(stubbed)} failing tests, "
                                   f"e.g. {sorted(stubbed)[0]}")
        start = fresh("audit")
        start_sha256 = trees.tree_digest(start)
        similar = quality.similarity(deletion.removed, start, exclude=set(deletion.deleted_symbols))
        if similar.score >= opts.max_similarity:
            raise Rejected("similar", f"the deleted code is {similar.score:.2f} similar to {similar.nearest}, "
                                      "which the start state keeps")
        text = statement.write(deletion, original, failing)
        given = leaks.declared(original, deletion.deleted_symbols, deletion.keep_docstrings)
        needles = leaks.needles(deletion.removed, original, deletion.files, given)
        if not needles:
            raise Rejected("leak", "the deleted code has no distinctive line to audit for copies")
        hit = (leaks.audit(needles, [start], {"problem_statement": text})
               or _exposed(ctx, start, needles, runner.backend))
        if hit:
            raise Rejected("leak", f"deleted code found at {hit}")
        # P2P is the whole stable passing baseline but F2P (never a sample). Some of it fails in
        # the start state (tests a trivial body passes, tests the deletion breaks that coverage
        # did not tie to it): the fix must make those pass too, so they stay. The empty patch
        # (no-op) and the gold patch go through the grader learners are scored by.
        p2p = [t for t in ctx.passing if t.split("::")[0] not in deleted_files and t not in set(failing)
               and t not in gone]
        timeout = opts.run_timeout(ctx)
        noop = grade(grade_task(ctx, deletion_patch, patch, failing, p2p, timeout), "", runner.backend, runner=runner)
        spent.append(noop.seconds)
        if noop.status == GradeStatus.BROKEN:
            raise Broke(noop.reason)
        if noop.status == GradeStatus.RESOLVED or any(o == "passed" for o in noop.fail_to_pass.values()):
            passing = sorted(t for t, o in noop.fail_to_pass.items() if o == "passed")
            raise Rejected("noop", f"the unchanged start state passes {passing[0] if passing else 'every test'}")
        gold = grade(grade_task(ctx, deletion_patch, patch, failing, p2p, timeout), patch, runner.backend,
                     runner=runner)
        spent.append(gold.seconds)
        if gold.status == GradeStatus.BROKEN:
            raise Broke(gold.reason)
        if gold.status != GradeStatus.RESOLVED:
            raise Rejected("gold", f"the gold patch is {gold.status}: {gold.reason}")
    return Checked(fail_to_pass=failing, pass_to_pass=p2p, deletion_patch=deletion_patch, patch=patch,
                   problem_statement=text, start_sha256=start_sha256, similarity=round(similar.score, 4),
                   stub_passed=sorted(stubbed))


def unavailable(deletion: Deletion, reason: str) -> Verdict:
    """The `broken` verdict of a deletion whose repository context cannot be loaded."""
    return Verdict(deletion_id=deletion.deletion_id, repo=deletion.repo, strategy=deletion.strategy,
                   target=deletion.target, status=VerdictStatus.BROKEN, stage="sandbox", reason=reason)


def verify_in(contexts: dict, run_dir: Path, records: dict[str, RepoRecord], deletion: Deletion, backend,
              opts: VerifyOptions) -> Verdict:
    """`verify_one`, with the deletion's repo context loaded from `run_dir` once into `contexts`
    (an executor's worker calls this; it writes nothing)."""
    if deletion.repo not in contexts:
        try:
            contexts[deletion.repo] = RepoContext.load(run_dir, records[deletion.repo])
        except (Broke, KeyError, OSError) as exc:
            contexts[deletion.repo] = f"repo context unavailable: {exc}"
    ctx = contexts[deletion.repo]
    return unavailable(deletion, ctx) if isinstance(ctx, str) else verify_one(ctx, deletion, backend, opts)


def verify_all(run_dir: Path, backend, opts: VerifyOptions = VerifyOptions(), *, jobs: int = 1,
               on_step=lambda item, step: None, executor=None) -> list[Verdict]:
    """Verify every deletion that has no verdict yet, on `executor` (featdel.pipeline.executor; default:
    `jobs` threads here); return all verdicts of the run. Only this driver writes verdicts, each
    deletion's at most once."""
    from featdel.core.parallel import thread_map

    rd = RunDir(run_dir)
    deletions = rd.deletions()
    done = {v.deletion_id for v in rd.verdicts()}
    rd.stage_options("verified", dataclasses.asdict(opts), started=any(d.deletion_id in done for d in deletions))
    todo = [d for d in deletions if d.deletion_id not in done]
    for d in deletions:
        if d.deletion_id in done:
            on_step(d.deletion_id, "resumed")
    records = {r.name: r for r in rd.latest_repos().values()}
    if executor is None:
        contexts: dict = {}

        def work(deletion: Deletion) -> Verdict:
            on_step(deletion.deletion_id, "verifying")
            return verify_in(contexts, run_dir, records, deletion, backend, opts)

        results = thread_map(work, todo, jobs)
    else:
        results = executor.verify(todo, run_dir, records, backend=backend, opts=opts, on_step=on_step)
    for verdict in results:
        if verdict.deletion_id in done:
            continue
        rd.add_verdict(verdict)
        done.add(verdict.deletion_id)
        on_step(verdict.deletion_id, "done")
    return rd.verdicts()

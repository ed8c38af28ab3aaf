"""Stage 3, verify: every rule of the validation contract, on the tree a learner will get.

In: a run directory with deletions. Out: one `Verdict` per deletion in `verdicts.jsonl`.
For each deletion, in order (the first rule that fails ends it, and the verdict names it):
  build   the start state (snapshot + `git apply deletion_patch`, scrubbed, one commit) parses,
          imports, and `pytest --collect-only` collects the baseline tests (minus deleted files)
  tests   K runs of the selected tests: fail-to-pass = passed at baseline, fail or error in every
          run (a skip is not a failure); pass-to-pass = pass in every run; F2P >= 1
  gold    `patch` applied to the start state makes every F2P and P2P test pass
  leak    no distinctive deleted line in the start state (git objects decompressed), the
          environment, or the problem statement
  noop    a fresh, unchanged start state still fails every F2P test
"Sandbox or environment broke" ends as status `broken`, never as `rejected`.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from featdel import envs, leaks, statement, trees
from featdel.coverage_map import CoverageMap
from featdel.errors import SandboxError
from featdel.records import (Deletion, RepoRecord, Verdict, VerdictStatus, append_jsonl, read_jsonl)
from featdel.spans import has_syntax_error
from featdel.testrun import RunOptions, SuiteRun, run_suite


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifyOptions:
    reruns: int = 3
    p2p_sample: int = 20
    full_suite: bool = False
    timeout_s: float | None = None  # per test run; default: 10x the baseline suite, at least 60 s
    seed: int = 0

    def run_timeout(self, ctx: RepoContext) -> float:
        return self.timeout_s or max(60.0, 10 * ctx.record.suite_seconds)


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
        repo_dir = run_dir / "repos" / record.name
        env = envs.load(Path(record.env_dir))
        if env is None:
            raise Broke(f"environment {record.env_dir} is missing; run `featdel mine` again")
        baseline = json.loads((repo_dir / "baseline.json").read_text())
        tests = baseline["tests"]
        passing = sorted(t for t, v in tests.items() if not v["flaky"] and set(v["outcomes"]) == {"passed"})
        return cls(record=record, env=env, snapshot=repo_dir / "snapshot.tar.gz",
                   cmap=CoverageMap.load(repo_dir / "coverage.json"), passing=passing, collected=set(tests),
                   image=record.image_name)


def build_check(ctx: RepoContext, tree: Path, backend, deleted_files: set[str]) -> str | None:
    """None when the tree imports and collects the baseline tests, else the reason."""
    modules = [d.removeprefix("src/").removesuffix(".py").replace("/", ".") for d in ctx.env.recipe.package_dirs]
    # The script always prints one JSON line; anything else means the interpreter or sandbox broke.
    code = (
        "import importlib, json, sys\n"
        "try:\n    [importlib.import_module(m) for m in sys.argv[1:]]\n    err = None\n"
        "except BaseException as exc:\n    err = f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]\n"
        "print('FEATDEL-IMPORT ' + json.dumps(err))"
    )
    from featdel.sandboxes.base import Limits, SandboxSpec

    spec = SandboxSpec(workdir=tree, mount_at=ctx.env.src, readonly=(ctx.env.venv, ctx.env.python_prefix),
                       image=ctx.image, limits=Limits(timeout_s=120))
    with backend.open(spec) as sandbox:
        result = sandbox.run([str(ctx.env.venv / "bin" / "python"), "-c", code, *modules],
                             cwd=ctx.env.src, env=ctx.env.environ())
    if result.timed_out:
        return "importing the package did not finish within 120s"
    marker = [ln for ln in result.stdout.splitlines() if ln.startswith("FEATDEL-IMPORT ")]
    if not marker:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise Broke(f"the import check did not run (exit {result.exit_code}): {last[:200]}")
    error = json.loads(marker[-1].removeprefix("FEATDEL-IMPORT "))
    if error:
        return f"the package no longer imports: {error}"
    run = run_suite(ctx.env, backend, RunOptions(collect_only=True, timeout_s=300), tree=tree, image=ctx.image)
    if run.timed_out:
        return "collection did not finish within 300s"
    if run.broken:
        raise Broke(run.broken)
    if run.collect_errors:
        return f"collection fails: {run.collect_errors[0]}"
    expected = {t for t in ctx.collected if t.split("::")[0] not in deleted_files}
    missing = expected - set(run.collected)
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
                reason = build_check(ctx, tree, backend, deleted)
            return True if reason is None else reason

        return check

    return factory


def select_tests(ctx: RepoContext, deletion: Deletion, opts: VerifyOptions) -> tuple[list[str], list[str]]:
    """(tests the coverage map ties to the deleted symbols, a seeded sample of the others)."""
    deleted_files = {p for p, text in deletion.files.items() if text is None}
    refs = set(deletion.deleted_symbols)
    tied = set()
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


def _run(ctx: RepoContext, backend, tree: Path, tests: list[str], opts: VerifyOptions, spent: list[float],
         stage: str) -> SuiteRun:
    timeout = opts.run_timeout(ctx)
    run = run_suite(ctx.env, backend, RunOptions(tests=tests, timeout_s=timeout), tree=tree, image=ctx.image)
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
        f2p, p2p = _verify(ctx, deletion, backend, opts, spent)
    except Rejected as exc:
        return Verdict(**base, status=VerdictStatus.REJECTED, stage=exc.stage, reason=str(exc), test_seconds=sum(spent))
    except (Broke, SandboxError) as exc:
        return Verdict(**base, status=VerdictStatus.BROKEN, stage="sandbox", reason=str(exc), test_seconds=sum(spent))
    return Verdict(**base, status=VerdictStatus.VERIFIED, stage="done", FAIL_TO_PASS=f2p, PASS_TO_PASS=p2p,
                   test_seconds=round(sum(spent), 3), image_name=ctx.image)


def _verify(ctx, deletion: Deletion, backend, opts: VerifyOptions, spent) -> tuple[list[str], list[str]]:
    deletion_patch, patch = trees.diff(ctx.snapshot, deletion.files)
    deleted_files = {p for p, text in deletion.files.items() if text is None}
    with tempfile.TemporaryDirectory(prefix="featdel-verify-") as tmp:
        def fresh(name: str) -> Path:
            return trees.start_state(ctx.snapshot, deletion_patch, Path(tmp) / name)

        for path, text in sorted(deletion.files.items()):
            if text is not None and has_syntax_error(text.encode()):
                raise Rejected("build", f"{path} does not parse after the deletion")
        reason = build_check(ctx, fresh("build"), backend, deleted_files)
        if reason:
            raise Rejected("build", reason)
        tied, sample = select_tests(ctx, deletion, opts)
        if not tied:
            raise Rejected("tests", "no passing baseline test executes the deleted code")
        selected = tied + sample
        runs = [_run(ctx, backend, fresh(f"run{i}"), selected, opts, spent, "tests") for i in range(opts.reruns)]
        failing = [t for t in selected if all(r.outcomes.get(t, "missing") in ("failed", "error", "missing") for r in runs)]
        passing = [t for t in selected if all(r.outcomes.get(t) == "passed" for r in runs)]
        if not failing:
            flipped = [t for t in tied if len({r.outcomes.get(t, "missing") for r in runs}) > 1]
            if flipped:
                raise Rejected("reruns", f"outcomes changed across {opts.reruns} runs, e.g. {flipped[0]}")
            raise Rejected("tests", f"none of the {len(tied)} tests tied to the deleted code fails")
        # A test whose outcome changed between runs is in neither list: it is never a reward.
        gold = fresh("gold")
        trees.apply_patch(gold, patch)
        run = _run(ctx, backend, gold, failing + passing, opts, spent, "gold")
        not_restored = [t for t in failing + passing if run.outcomes.get(t) != "passed"]
        if not_restored:
            raise Rejected("gold", f"the gold patch leaves {len(not_restored)} tests failing, e.g. {not_restored[0]}")
        original = trees.extract(ctx.snapshot, Path(tmp) / "original")
        text = statement.write(deletion, original, failing)
        given = leaks.declared(original, deletion.deleted_symbols, deletion.keep_docstrings)
        needles = leaks.needles(deletion.removed, original, deletion.files, given)
        start = fresh("audit")
        hit = leaks.audit(needles, [start], {"problem_statement": text}, third_party=[ctx.env.venv])
        if hit:
            raise Rejected("leak", f"deleted code found at {hit}")
        noop = _run(ctx, backend, fresh("noop"), failing, opts, spent, "noop")
        still_passing = [t for t in failing if noop.outcomes.get(t) == "passed"]
        if still_passing:
            raise Rejected("noop", f"the unchanged start state passes {still_passing[0]}")
    return failing, passing


def verify_all(run_dir: Path, backend, opts: VerifyOptions = VerifyOptions(), *, jobs: int = 1,
               on_step=lambda item, step: None) -> list[Verdict]:
    """Verify every deletion that has no verdict yet; return all verdicts of the run."""
    from featdel.mine import latest_records

    done = {v.deletion_id for v in read_jsonl(run_dir / "verdicts.jsonl", Verdict)}
    todo = [d for d in read_jsonl(run_dir / "deletions.jsonl", Deletion) if d.deletion_id not in done]
    for d in read_jsonl(run_dir / "deletions.jsonl", Deletion):
        if d.deletion_id in done:
            on_step(d.deletion_id, "resumed")
    records = {r.name: r for r in latest_records(run_dir).values()}
    contexts: dict[str, RepoContext | str] = {}

    def work(deletion: Deletion) -> Verdict:
        on_step(deletion.deletion_id, "verifying")
        if deletion.repo not in contexts:
            try:
                contexts[deletion.repo] = RepoContext.load(run_dir, records[deletion.repo])
            except (Broke, KeyError, OSError) as exc:
                contexts[deletion.repo] = f"repo context unavailable: {exc}"
        ctx = contexts[deletion.repo]
        if isinstance(ctx, str):
            verdict = Verdict(deletion_id=deletion.deletion_id, repo=deletion.repo, strategy=deletion.strategy,
                              target=deletion.target, status=VerdictStatus.BROKEN, stage="sandbox", reason=ctx)
        else:
            verdict = verify_one(ctx, deletion, backend, opts)
        append_jsonl(run_dir / "verdicts.jsonl", verdict)
        on_step(deletion.deletion_id, "done")
        return verdict

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(work, todo))
    return read_jsonl(run_dir / "verdicts.jsonl", Verdict)

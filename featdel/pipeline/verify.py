"""Stage 3, verify: every rule of the validation contract, on the tree a learner will get.

In: a run directory with deletions. Out: one `Verdict` per deletion in `verdicts.jsonl`.
For each deletion, in order (the first rule that fails ends it, and the verdict names it; the
tree parses first, then similar and leak, which run no test, then the rest of build):
  build   the start state (snapshot + `git apply deletion_patch`, scrubbed, one commit) parses,
          imports, and pytest collects the baseline tests (minus deleted files); that run also
          runs the selection of `tests` (pytest deselects the rest after collecting).
          One exception (featdel.code.gone): a test module whose collection fails only
          because it imports a deleted name (ImportError / AttributeError naming it) is allowed,
          and its baseline-passing tests join the selected tests as F2P candidates; any other
          collection error rejects
  similar the deleted code is not a near copy (identifier-normalised) of code the start keeps
  leak    the deleted code has a distinctive line, and none is in the start state (git objects
          decompressed), the environment or what the sandbox shows. Both before any test runs
  tests   a run of the selected tests (with `--continue-on-collection-errors`, so an allowed
          module does not stop the others): the F2P candidates are those that passed at baseline
          and fail, error or are not collected (a skip is not a failure)
  stub    candidates that a stub body (`pass`, `return None`, the first argument, an object equal
          to anything: featdel.deletion.equal_stub) makes pass leave; none left is rejected.
          Wiring the deletion cut in other files (a re-export) comes back with the stub, so the
          stub is importable and the gate not vacuous
  reruns  K-1 more runs of what is left: F2P = the candidates that fail in every run; F2P >= 1.
          The grader treats an uncollected F2P test as failed too, so noop and gold agree
  statement the problem statement holds no distinctive deleted line
  noop    the grader, given the empty patch, fails every F2P test (the run takes F2P only);
          P2P = the whole stable passing baseline but F2P (never a sample), some of which may
          fail in the start state
  gold    the grader, given `patch`, resolves the task; the run takes what the change can affect
          (featdel.pipeline.gates.affected). `full_suite` makes every run take every test
Each rule is one function of featdel.pipeline.gates, run in order (`GATES`); each rejection
carries a rule code (`Verdict.rule`, featdel.core.records.RULES) besides its prose reason.
The verdict keeps what was checked (patches, statement, start-state hash) for `package`.
`combine` deletions (verified parts joined) come after a first pass and go through every rule
again as a whole (featdel.pipeline.delete.combine_all).
"Sandbox or environment broke" ends as status `broken`, never as `rejected`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.core.records import Deletion, RepoRecord, Verdict, VerdictStatus
from featdel.core.rundir import RunDir
from featdel.deletion import quality
from featdel.env.testrun import SuiteRunner
from featdel.pipeline.context import Broke, RepoContext
from featdel.pipeline.gates import GATES, Rejected, Work


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
    # The original's bytecode in the trees the gates run (featdel.env.bytecode); False compiles
    # every module in every run, as before (bench/verify_speed.py compares the two)
    bytecode: bool = True
    # Full tracebacks in the gates' test runs; False (the default) reports each failure in one
    # line (`Language.quiet_args`): only outcomes are read, and most of these runs fail by design
    tracebacks: bool = False
    # The build check's collecting run also runs the first selection (featdel.pipeline.gates.builds);
    # False starts a test process for each, as before
    merge_first_run: bool = True
    # A candidate's plain test runs fork from a pytest kept warm in its sandbox (featdel.env.zygote;
    # the local backend); False starts the interpreter and pytest for each, as before
    warm_pytest: bool = True

    def run_timeout(self, ctx: RepoContext) -> float:
        return self.timeout_s or max(60.0, 10 * ctx.record.suite_seconds)


# Options that change how fast verification runs, never a verdict (bench/verify_speed.py compares):
# a run may resume with other values
SPEED_ONLY = frozenset({"warm_sandbox", "bytecode", "tracebacks", "merge_first_run", "warm_pytest"})


def verify_one(ctx: RepoContext, deletion: Deletion, backend, opts: VerifyOptions,
               runner: SuiteRunner | None = None, *, until: str | None = None) -> Verdict:
    """Run every gate on one deletion; the first that fails names the verdict. `runner`: an open
    runner of `ctx`'s env to reuse (its warm sandbox is reset after every run); default: a new one.
    `until`: stop after the gate of that name (benches that re-judge one rule); a deletion that
    passes it is `verified` at stage `until`, a verdict for a bench, never for a run."""
    base = dict(deletion_id=deletion.deletion_id, repo=deletion.repo, strategy=deletion.strategy,
                target=deletion.target)
    spent: list[float] = []
    own = runner is None
    try:
        with (ctx.runner(backend, warm=opts.warm_sandbox) if own
              else contextlib.nullcontext(runner)) as runner, \
                tempfile.TemporaryDirectory(prefix="featdel-verify-") as tmp:
            runner.zygote = opts.warm_pytest and opts.warm_sandbox
            w = Work(ctx=ctx, deletion=deletion, runner=runner, opts=opts, tmp=Path(tmp), spent=spent)
            w.deletion_patch, w.patch = ctx.diff(deletion.files)
            for gate in GATES:
                gate(w)
                if gate.__name__ == until:
                    return Verdict(**base, status=VerdictStatus.VERIFIED, stage=until, rule=until,
                                   test_seconds=sum(spent))
    except Rejected as exc:
        return Verdict(**base, status=VerdictStatus.REJECTED, stage=exc.stage, rule=exc.rule, reason=str(exc),
                       test_seconds=sum(spent))
    except (Broke, SandboxError) as exc:
        return Verdict(**base, status=VerdictStatus.BROKEN, stage="sandbox", rule="sandbox.broke", reason=str(exc),
                       test_seconds=sum(spent))
    except Exception as exc:  # a bug or a surprise on one candidate: recorded, the batch goes on
        return Verdict(**base, status=VerdictStatus.BROKEN, stage="crash", rule="crash", test_seconds=sum(spent),
                       reason=f"{type(exc).__name__}: {str(exc)[:200]}", traceback=traceback.format_exc())
    return Verdict(**base, status=VerdictStatus.VERIFIED, stage="done", rule="done", FAIL_TO_PASS=w.failing,
                   PASS_TO_PASS=w.p2p, test_seconds=round(sum(spent), 3), image_name=ctx.image,
                   deletion_patch=w.deletion_patch, patch=w.patch, problem_statement=w.statement,
                   start_sha256=w.start_sha256, similarity=w.similarity, stub_passed=sorted(w.stubbed),
                   timeout_s=opts.run_timeout(ctx)).stamped()


def unavailable(deletion: Deletion, reason: str) -> Verdict:
    """The `broken` verdict of a deletion whose repository context cannot be loaded."""
    return Verdict(deletion_id=deletion.deletion_id, repo=deletion.repo, strategy=deletion.strategy,
                   target=deletion.target, status=VerdictStatus.BROKEN, stage="sandbox", rule="sandbox.unavailable",
                   reason=reason)


def verify_in(contexts: dict, run_dir: Path, records: dict[str, RepoRecord], deletion: Deletion, backend,
              opts: VerifyOptions, runners=None) -> Verdict:
    """`verify_one`, with the deletion's repo context loaded from `run_dir` once into `contexts`
    (an executor's worker calls this; it writes nothing). `runners`: a `Runners` of this thread,
    whose sandbox for the repository the candidate reuses."""
    if deletion.repo not in contexts:
        try:
            contexts[deletion.repo] = RepoContext.load(run_dir, records[deletion.repo])
        except (Broke, KeyError, OSError) as exc:
            contexts[deletion.repo] = f"repo context unavailable: {exc}"
    ctx = contexts[deletion.repo]
    if isinstance(ctx, str):
        return unavailable(deletion, ctx)
    runner = runners.get(ctx, backend, opts) if runners is not None else None
    verdict = verify_one(ctx, deletion, backend, opts, runner)
    if runner is not None and verdict.status == VerdictStatus.BROKEN:
        runners.drop(ctx)  # whatever broke stays with this candidate: the next one gets a new sandbox
    return verdict


class Runners:
    """One open `SuiteRunner` per (thread, repository): the candidates a thread verifies of one
    repository share its warm sandbox, reset after every run as between one candidate's runs.
    `close()` closes them all."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[SuiteRunner] = []
        self._lock = threading.Lock()

    def get(self, ctx: RepoContext, backend, opts: VerifyOptions) -> SuiteRunner | None:
        if not opts.warm_sandbox:
            return None
        held = self._local.__dict__.setdefault("by_repo", {})
        if ctx.record.name not in held:
            runner = ctx.runner(backend, warm=True).__enter__()
            with self._lock:
                self._all.append(runner)
            held[ctx.record.name] = runner
        return held[ctx.record.name]

    def drop(self, ctx: RepoContext) -> None:
        runner = self._local.__dict__.get("by_repo", {}).pop(ctx.record.name, None)
        if runner is not None:
            runner.close()

    def close(self) -> None:
        with self._lock:
            for runner in self._all:
                runner.close()
            self._all.clear()


def verify_here(deletions: list[Deletion], run_dir: Path, records: dict[str, RepoRecord], *, backend,
                opts: VerifyOptions, on_step, jobs: int = 1):
    """Verdicts of `deletions` from `jobs` threads in this process, as they finish (each repo
    context loaded once): the default of `verify_all`, and the local executor's work."""
    from featdel.core.parallel import thread_map

    contexts: dict = {}
    runners = Runners()

    def work(deletion: Deletion) -> Verdict:
        on_step(deletion.deletion_id, "verifying")
        return verify_in(contexts, run_dir, records, deletion, backend, opts, runners)

    try:
        yield from thread_map(work, deletions, jobs)
    finally:
        runners.close()


def verify_all(run_dir: Path, backend, opts: VerifyOptions = VerifyOptions(), *, jobs: int = 1,
               on_step=lambda item, step: None, executor=None) -> list[Verdict]:
    """Verify every deletion that has no verdict yet, on `executor` (featdel.pipeline.executor; default:
    `jobs` threads here); return all verdicts of the run. Only this driver writes verdicts, each
    deletion's at most once."""
    rd = RunDir(run_dir)
    deletions = rd.deletions()
    done = {v.deletion_id for v in rd.verdicts()}
    rd.stage_options("verified", dataclasses.asdict(opts), started=any(d.deletion_id in done for d in deletions),
                     speed_only=SPEED_ONLY)
    todo = [d for d in deletions if d.deletion_id not in done]
    for d in deletions:
        if d.deletion_id in done:
            on_step(d.deletion_id, "resumed")
    records = {r.name: r for r in rd.latest_repos().values()}
    if executor is None:
        results = verify_here(todo, run_dir, records, backend=backend, opts=opts, on_step=on_step, jobs=jobs)
    else:
        results = executor.verify(todo, run_dir, records, backend=backend, opts=opts, on_step=on_step)
    for verdict in results:
        if verdict.deletion_id in done:
            continue
        rd.add_verdict(verdict)
        done.add(verdict.deletion_id)
        on_step(verdict.deletion_id, "done")
    return rd.verdicts()

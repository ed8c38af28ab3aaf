"""`featdel run` as a library: mine, delete, verify (with the combine pass) and package a run
directory, each stage with a progress bar. The CLI parses options and calls these; so do tests.

In: corpus entries or a run directory, a sandbox backend, and the stage options. Out: the run
directory filled stage by stage (resumable: a stage skips what it finished), and what each
stage returns. Steering (featdel.curriculum) comes in as the delete stage's `plan`, so this
layer never imports the curriculum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import FeatdelError
from featdel.core.progress import StepProgress
from featdel.core.records import RepoRecord, Verdict
from featdel.core.rundir import RunDir
from featdel.pipeline.delete import Planner
from featdel.pipeline.verify import VerifyOptions, verify_all


@dataclass(frozen=True, kw_only=True)
class DeleteOptions:
    strategies: list[str] | None = None  # None: every strategy (agent only when configured)
    max_candidates: int = 10
    seed: int = 0
    keep_docstrings: bool = True
    agent: dict | None = None  # the agent strategy's options: base_url, model, max_turns

    def names(self) -> list[str]:
        from featdel.deletion import STRATEGIES, strategy

        names = self.strategies or [n for n in STRATEGIES if n != "agent" or self.agent]
        for name in names:
            strategy(name)  # unknown names fail here, before any work
        return names


def agent_options(url: str | None, model: str | None, turns: int, strategies) -> dict | None:
    """The `agent` strategy's options (`DeleteOptions.agent`), or None when it is not asked for;
    a one-line error when they are incomplete or the URL is not one."""
    if url is None and model is None:
        if strategies and "agent" in strategies:
            raise FeatdelError("--strategy agent needs --agent-url URL and --agent-model NAME")
        return None
    if not (url and model):
        raise FeatdelError("give both --agent-url URL and --agent-model NAME")
    from featdel.core.llm import ChatClient

    ChatClient(url, model)  # a bad URL fails here, before any work
    return {"base_url": url, "model": model, "max_turns": turns}


def mine_stage(entries, run_dir: Path, backend, thresholds, *, jobs: int = 1, executor=None) -> list[RepoRecord]:
    from featdel.pipeline.mine import mine

    with StepProgress("mining", [e.source for e in entries]) as progress:
        return mine(entries, run_dir, backend=backend, thresholds=thresholds, jobs=jobs, on_step=progress.step,
                    executor=executor)


def _check_for(run_dir: Path, backend, options: dict | None):
    """record -> the strategies' check factory for that repository."""
    from featdel.pipeline.context import RepoContext, make_check

    def check_for(record):
        ctx = RepoContext.load(run_dir, record)
        if not options:
            return make_check(ctx, backend)
        from featdel.deletion.tested import with_tests

        return with_tests(make_check(ctx, backend), ctx, backend)  # the agent's `check` tool runs tests too

    return check_for


def delete_stage(run_dir: Path, backend, opts: DeleteOptions, *, plan: Planner | None = None, jobs: int = 1) -> int:
    """Deletions for every mined repository, `jobs` at a time; returns how many the run holds.
    `plan`: a steered plan (featdel.curriculum.generate.SteeredPlanner); default the seeded one
    over `opts`."""
    from featdel.pipeline.delete import delete_all

    names = opts.names()
    options = {"agent": opts.agent} if opts.agent else None
    with StepProgress("deleting", [r.name for r in RunDir(run_dir).mined()]) as progress:
        deletions = delete_all(run_dir, strategies=names, max_candidates=opts.max_candidates, seed=opts.seed,
                               keep_docstrings=opts.keep_docstrings, check_for=_check_for(run_dir, backend, options),
                               strategy_options=options, plan=plan, on_step=progress.step, jobs=jobs)
    return len(deletions)


def overlapped_stages(entries, run_dir: Path, backend, *, thresholds, delete: DeleteOptions, verify: VerifyOptions,
                      jobs: int, plan: Planner | None = None, on_mined=lambda records: None) -> None:
    """Mine, delete and verify overlapped in `jobs` threads (featdel.pipeline.overlap)."""
    from featdel.pipeline.delete import SeededPlanner
    from featdel.pipeline.overlap import overlapped

    options = {"agent": delete.agent} if delete.agent else None
    plan = plan or SeededPlanner(strategies=delete.names(), max_candidates=delete.max_candidates, seed=delete.seed,
                                 keep_docstrings=delete.keep_docstrings, strategy_options=options)
    overlapped(entries, run_dir, backend, thresholds=thresholds, plan=plan, max_candidates=delete.max_candidates,
               seed=delete.seed, strategy_options=options, check_for=_check_for(run_dir, backend, options),
               verify_opts=verify, jobs=jobs, on_mined=on_mined)


def verify_stage(run_dir: Path, backend, opts: VerifyOptions, *, executor=None) -> list[Verdict]:
    """Verify every deletion; when the delete stage ran with the `combine` strategy, join the
    verified ones (featdel.pipeline.delete.combine_all) and verify those too."""
    from featdel.pipeline.delete import combine_all

    rd = RunDir(run_dir)
    with StepProgress("verifying", [d.deletion_id for d in rd.deletions()]) as progress:
        verdicts = verify_all(run_dir, backend, opts, on_step=progress.step, executor=executor)
    if "combine" in rd.recorded("deleted").get("strategies", []):
        added = combine_all(run_dir, seed=opts.seed)
        with StepProgress("verifying combined", [d.deletion_id for d in added]) as progress:
            verdicts = verify_all(run_dir, backend, opts, on_step=progress.step, executor=executor)
    return verdicts


def run(entries, run_dir: Path, backend, *, thresholds, delete: DeleteOptions, verify: VerifyOptions,
        max_tasks: int | None = None, hide_tests: bool = False, jobs: int = 1, executor=None,
        plan: Planner | None = None, after_verify: Callable[[Path], object] | None = None,
        on_mined: Callable[[list[RepoRecord]], None] = lambda records: None,
        overlap: bool = True) -> tuple[list[Verdict], int, int]:
    """Every stage on `run_dir`; returns (verdicts, tasks, envs). `on_mined` sees the mining
    records before anything is deleted (the CLI prints them and stops when none is usable);
    `after_verify` runs before packaging (a steered run annotates its combined deletions).
    `overlap`: with `jobs` above 1 on local threads, the first three stages overlap
    (featdel.pipeline.overlap); False runs them one after another."""
    from featdel.pipeline.package import package

    if max_tasks is not None:
        from dataclasses import replace

        delete = replace(delete, max_candidates=min(delete.max_candidates, max_tasks))
    if overlap and jobs > 1 and getattr(executor, "name", "local") == "local":
        # Threads here: a repository's deletion and verification start as soon as it is mined
        overlapped_stages(entries, run_dir, backend, thresholds=thresholds, delete=delete, verify=verify, jobs=jobs,
                          plan=plan, on_mined=on_mined)
    else:
        on_mined(mine_stage(entries, run_dir, backend, thresholds, jobs=jobs, executor=executor))
        delete_stage(run_dir, backend, delete, plan=plan, jobs=jobs)
    verdicts = verify_stage(run_dir, backend, verify, executor=executor)
    if after_verify is not None:
        after_verify(run_dir)
    tasks, envs = package(run_dir, max_tasks=max_tasks, hide_tests=hide_tests)
    return verdicts, tasks, envs

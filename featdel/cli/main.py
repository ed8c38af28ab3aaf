"""The `featdel` command line. Each command parses options and calls one library function;
heavy imports live inside the commands so `featdel --help` stays instant."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import (
    CONTEXT,
    INSPECT,
    LEARN,
    MAKE,
    SETUP,
    VERBOSE,
    Address,
    Corpus,
    ExecutorOpt,
    Jobs,
    Out,
    RunArg,
    Sandbox,
    StrategyName,
    TasksAlias,
    ThresholdOpt,
    Unsafe,
    Verbose,
    cli_errors,
    executor_from,
    plain,
    run_arg,
    thresholds_from,
)
from featdel.core.text import counted

app = typer.Typer(
    name="featdel",
    help="Turn well-tested repositories into verified coding tasks by feature deletion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings=CONTEXT,
)


@app.callback()
def main(ctx: typer.Context, verbose: Verbose = False) -> None:
    """featdel: mine repositories, delete tested features, verify and package the tasks."""
    token = VERBOSE.set(verbose)
    ctx.call_on_close(lambda: VERBOSE.reset(token))


def entries_from(sources: list[str], corpus: Path | None):
    from featdel.env.corpus import entries

    return entries(sources, corpus)


@app.command(rich_help_panel=MAKE)
def mine(
    sources: Annotated[list[str] | None, typer.Argument(
        metavar="SOURCE", show_default=False, help="Local git repo, git URL\\[@rev] or pypi:NAME==VER.")] = None,
    out: Out = Path("runs/mine"),
    corpus: Corpus = None,
    workers: Jobs = 1,
    sandbox: Sandbox = "local",
    unsafe_no_sandbox: Unsafe = False,
    threshold: ThresholdOpt = None,
    executor: ExecutorOpt = "local",
    address: Address = None,
    verbose: Verbose = False,
) -> None:
    """Pin repositories, build their environments, run the baseline and map coverage.

    Writes OUT/repos.jsonl (one record per repository) and OUT/repos/NAME/{baseline,coverage}.json.
    Running it again on the same --out resumes: finished repositories are not redone.
    Thresholds (--threshold KEY=VALUE): min_passing=10, max_failure_rate=0.2,
    max_suite_seconds=600, min_coverage=30 (percent), baseline_runs=3.

    Examples:

      featdel mine pypi:cachetools==5.5.0 --out runs/a

      featdel mine --corpus corpora/default.toml --out runs/a -j 2

      featdel mine ./my-repo https://github.com/pallets/itsdangerous.git@2.2.0 --out runs/b

      featdel mine --corpus corpora/pypi.toml --out runs/c --executor ray --address auto
    """
    from featdel.pipeline.run import mine_stage
    from featdel.sandboxes import get_backend

    with cli_errors(verbose):
        backend = get_backend(sandbox, unsafe_no_sandbox=unsafe_no_sandbox)
        _mined_or_exit(mine_stage(entries_from(sources or [], corpus), out, backend, thresholds_from(threshold),
                                  jobs=workers, executor=executor_from(executor, address, workers)))


Strategies = Annotated[list[StrategyName] | None, typer.Option("--strategy", "-s", callback=plain,
                                                              help="Deletion strategy (repeatable); default: all.")]
MaxCandidates = Annotated[int, typer.Option("--max-candidates", min=1, help="Deletions to make per repository.")]
Seed = Annotated[int, typer.Option("--seed", help="Seed for choosing candidates, strategies and P2P samples.")]
FullSuite = Annotated[bool, typer.Option("--full-suite", help="Run every test per candidate, not the coverage selection.")]
StripDocs = Annotated[bool, typer.Option("--strip-docstrings", help="Delete docstrings too (a harder task).")]
AgentUrl = Annotated[str | None, typer.Option("--agent-url", help="OpenAI-compatible server for --strategy agent "
                                              "(e.g. http://127.0.0.1:8000/v1); key from $FEATDEL_API_KEY.")]
AgentModel = Annotated[str | None, typer.Option("--agent-model", help="Model name the server serves (--strategy agent).")]
AgentTurns = Annotated[int, typer.Option("--agent-turns", min=1, help="Model replies per candidate (--strategy agent).")]


def _agent_options(url: str | None, model: str | None, turns: int, strategies) -> dict | None:
    from featdel.pipeline.run import agent_options

    return agent_options(url, model, turns, strategies)


@app.command(rich_help_panel=MAKE)
def delete(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory that `featdel mine` filled.")],
    strategy: Strategies = None,
    max_candidates: MaxCandidates = 10,
    seed: Seed = 0,
    strip_docstrings: StripDocs = False,
    agent_url: AgentUrl = None,
    agent_model: AgentModel = None,
    agent_turns: AgentTurns = 30,
    workers: Jobs = 1,
    sandbox: Sandbox = "local",
    unsafe_no_sandbox: Unsafe = False,
    verbose: Verbose = False,
) -> None:
    """Delete tested features from every mined repository (writes RUN/deletions.jsonl).

    Each edit must leave the repository importable and its tests collectable (checked in the
    sandbox after every step; failed steps are rolled back).

    Examples:

      featdel delete runs/a

      featdel delete runs/a -s body -s feature --max-candidates 20 --seed 1 -j 2

      featdel delete runs/a -s agent --agent-url http://127.0.0.1:8000/v1 --agent-model NAME --agent-turns 20
    """
    from featdel.core.rundir import RunDir
    from featdel.pipeline.run import DeleteOptions, delete_stage
    from featdel.sandboxes import get_backend

    with cli_errors(verbose):
        rd = RunDir(run_dir)
        rd.need(rd.repos_jsonl, "run `featdel mine ... --out DIR` first")
        options = _agent_options(agent_url, agent_model, agent_turns, strategy)
        opts = DeleteOptions(strategies=strategy, max_candidates=max_candidates, seed=seed,
                             keep_docstrings=not strip_docstrings, agent=options)
        n = delete_stage(run_dir, get_backend(sandbox, unsafe_no_sandbox=unsafe_no_sandbox), opts, jobs=workers)
        typer.echo(f"{n} deletions in {rd.deletions_jsonl}")


@app.command(rich_help_panel=MAKE)
def verify(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A run directory with deletions.")],
    full_suite: FullSuite = False,
    reruns: Annotated[int, typer.Option("--reruns", min=1, help="Runs whose outcomes must agree.")] = 3,
    seed: Seed = 0,
    workers: Jobs = 1,
    sandbox: Sandbox = "local",
    unsafe_no_sandbox: Unsafe = False,
    executor: ExecutorOpt = "local",
    address: Address = None,
    verbose: Verbose = False,
) -> None:
    """Verify every deletion (writes RUN/verdicts.jsonl); resumable.

    Examples:

      featdel verify runs/a

      featdel verify runs/a --full-suite --reruns 5 -j 2

      featdel verify runs/a --executor ray --address auto --sandbox docker
    """
    from featdel.cli.summaries import verdict_summary
    from featdel.core.rundir import RunDir
    from featdel.pipeline.run import verify_stage
    from featdel.pipeline.verify import VerifyOptions
    from featdel.sandboxes import get_backend

    with cli_errors(verbose):
        rd = RunDir(run_dir)
        rd.need(rd.deletions_jsonl, "run `featdel delete DIR` first")
        backend = get_backend(sandbox, unsafe_no_sandbox=unsafe_no_sandbox)
        opts = VerifyOptions(reruns=reruns, full_suite=full_suite, seed=seed)
        verdicts = verify_stage(run_dir, backend, opts, executor=executor_from(executor, address, workers))
        verdict_summary(verdicts)


HideTests = Annotated[bool, typer.Option(
    "--hide-tests", help="Leave the F2P test files out of the start state; test_patch restores them.")]


@app.command(rich_help_panel=MAKE)
def package(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A verified run directory.")],
    hide_tests: HideTests = False,
    verbose: Verbose = False,
) -> None:
    """Write verified tasks to RUN/tasks/*.parquet and environments to RUN/envs/*.parquet.

    Examples:

      featdel package runs/a

      featdel package runs/a --hide-tests

      duckdb -c "select instance_id, len(FAIL_TO_PASS) from read_parquet('runs/a/tasks/*.parquet')"
    """
    from featdel.core.rundir import RunDir
    from featdel.pipeline.package import package as write

    with cli_errors(verbose):
        rd = RunDir(run_dir)
        rd.need(rd.verdicts_jsonl, "run `featdel verify DIR` first")
        tasks, envs = write(run_dir, hide_tests=hide_tests)
        typer.echo(f"{counted(tasks, 'task')} in {rd.tasks_dir}, {counted(envs, 'environment')} in {rd.envs_dir}")


@app.command(rich_help_panel=MAKE)
def run(
    sources: Annotated[list[str] | None, typer.Argument(
        metavar="SOURCE", show_default=False, help="Local git repo, git URL\\[@rev] or pypi:NAME==VER.")] = None,
    out: Out = Path("runs/run"),
    corpus: Corpus = None,
    strategy: Strategies = None,
    max_candidates: MaxCandidates = 10,
    max_tasks: Annotated[int | None, typer.Option("--max-tasks", min=1, help="Stop packaging after this many tasks.")] = None,
    seed: Seed = 0,
    full_suite: FullSuite = False,
    workers: Jobs = 1,
    overlap: Annotated[bool, typer.Option(
        "--overlap/--no-overlap",
        help="With -j above 1: delete from and verify a repository while others still mine.")] = True,
    sandbox: Sandbox = "local",
    unsafe_no_sandbox: Unsafe = False,
    threshold: ThresholdOpt = None,
    hide_tests: HideTests = False,
    strip_docstrings: StripDocs = False,
    agent_url: AgentUrl = None,
    agent_model: AgentModel = None,
    agent_turns: AgentTurns = 30,
    target_pass_rate: Annotated[float | None, typer.Option(
        "--target-pass-rate", min=0.01, max=0.99, help="Per candidate, choose the knobs (strategy, docstrings, "
        "tests hidden) whose predicted pass rate for --learner is nearest this (featdel.curriculum).")] = None,
    learner: Annotated[str | None, typer.Option("--learner", help="Whose recorded attempts fit the difficulty "
                                                "model (with --target-pass-rate).")] = None,
    history: Annotated[list[Path] | None, typer.Option("--history", help="Run directory whose tasks and "
                       "curriculum.duckdb hold the learner's attempts (repeatable; default: --out).")] = None,
    executor: ExecutorOpt = "local",
    address: Address = None,
    verbose: Verbose = False,
) -> None:
    """Mine, delete, verify and package in one go; resumable on the same --out.

    With -j N (local executor) the stages overlap: a repository is deleted from and verified
    while others still mine, N threads in all (--no-overlap: one stage after another).

    With --target-pass-rate the knobs are chosen per candidate by the learner's difficulty model
    and recorded with the predicted pass rate in each task's `steering` column.

    Examples:

      featdel run pypi:inflection==0.5.1 --out runs/a

      featdel run --corpus corpora/default.toml --out runs/demo -j 2 --max-candidates 5

      featdel run pypi:inflection==0.5.1 --out runs/b --target-pass-rate 0.3 --learner policy-v3 --history runs/a

      featdel run pypi:inflection==0.5.1 --out runs/c --strategy agent --agent-url http://127.0.0.1:8000/v1 --agent-model NAME

      featdel run --corpus corpora/pypi.toml --out runs/d --executor ray --address auto --sandbox docker
    """
    from featdel.cli.summaries import verdict_summary
    from featdel.core.errors import FeatdelError
    from featdel.core.rundir import RunDir
    from featdel.pipeline.run import DeleteOptions
    from featdel.pipeline.run import run as run_all
    from featdel.pipeline.verify import VerifyOptions
    from featdel.sandboxes import get_backend

    with cli_errors(verbose):
        options = _agent_options(agent_url, agent_model, agent_turns, strategy)
        per_repo = max_candidates if max_tasks is None else min(max_candidates, max_tasks)
        plan = after = None
        if options is not None and target_pass_rate is not None:
            raise FeatdelError("--target-pass-rate steers the rule strategies only: run the agent strategy without "
                               "it (drop --target-pass-rate, or the --agent-* options)")
        if target_pass_rate is not None:
            from featdel.curriculum import generate

            plan = generate.steered_planner(learner=learner, target=target_pass_rate, history=history or [out],
                                            strategies=strategy, max_candidates=per_repo, seed=seed)

            def after(run_dir):
                return generate.annotate_combined(run_dir, plan.model, target=target_pass_rate, learner=learner)
        verdicts, tasks, envs = run_all(
            entries_from(sources or [], corpus), out, get_backend(sandbox, unsafe_no_sandbox=unsafe_no_sandbox),
            thresholds=thresholds_from(threshold), jobs=workers, executor=executor_from(executor, address, workers),
            delete=DeleteOptions(strategies=strategy, max_candidates=max_candidates, seed=seed,
                                 keep_docstrings=not strip_docstrings, agent=options),
            verify=VerifyOptions(full_suite=full_suite, seed=seed), max_tasks=max_tasks, hide_tests=hide_tests,
            plan=plan, after_verify=after, on_mined=_mined_or_exit, overlap=overlap)
        verdict_summary(verdicts)
        rd = RunDir(out)
        typer.echo(f"{counted(tasks, 'task')} in {rd.tasks_dir}, {counted(envs, 'environment')} in {rd.envs_dir}")


@app.command(rich_help_panel=INSPECT)
def show(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A packaged run directory.")],
    instance_id: Annotated[str | None, typer.Argument(help="A task id; omit to list the tasks.")] = None,
    verbose: Verbose = False,
) -> None:
    """List the packaged tasks, or print one readably (statement, F2P tests, diff).

    Examples:

      featdel show runs/a

      featdel show runs/a inflection-0.5.1__body__1a2b3c4d
    """
    from featdel.cli.summaries import show_task, task_list
    from featdel.core.rundir import RunDir

    with cli_errors(verbose):
        RunDir(run_dir).need(RunDir(run_dir).tasks_dir, "run `featdel package DIR` first")
        show_task(run_dir, instance_id) if instance_id else task_list(run_dir)


@app.command(rich_help_panel=INSPECT)
def materialize(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN", help="A packaged run directory.")],
    instance_id: Annotated[str, typer.Argument(help="The task to materialise.")],
    dest: Annotated[Path, typer.Argument(help="Where to write the start state (must not exist).")],
    verbose: Verbose = False,
) -> None:
    """Write a task's start state exactly as a learner gets it, and say how to enter its env.

    Example:

      featdel materialize runs/a inflection-0.5.1__body__1a2b3c4d /tmp/task
    """
    from featdel.interop.materialize import materialize as write

    with cli_errors(verbose):
        hint = write(run_dir, instance_id, dest)
        typer.echo(hint)


@app.command(rich_help_panel=LEARN)
def evaluate(
    ctx: typer.Context,
    predictions: Annotated[Path, typer.Option("--predictions", help="SWE-bench predictions: JSON Lines with "
                                              "instance_id, model_patch, model_name_or_path.")],
    run_dir: RunArg = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Results (JSON Lines); appended, so a rerun resumes.")]
    = Path("results.jsonl"),
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Predictions graded in parallel.")] = 1,
    sandbox: Sandbox = "local",
    timeout: Annotated[float | None, typer.Option("--timeout", min=1, help="Seconds per test run (default: the task's).")] = None,
    allow_suspect: Annotated[bool, typer.Option("--allow-suspect", help="Grade patches the tamper scan flags "
                                                "instead of scoring them 0.")] = False,
    verbose: Verbose = False,
    tasks: TasksAlias = None,
) -> None:
    """Grade a model's patches on packaged tasks, safely (docs/grading.md).

    Each patch's edits to non-test source files are applied to a pristine start state, the
    FAIL_TO_PASS tests and the whole passing baseline run in the sandbox, and each prediction
    gets a status (resolved, unresolved, patch_failed, suspect, broken) and a reward in
    OUT, with a folder per prediction in OUT_logs/ (patch, test output, report, result).

    Examples:

      featdel evaluate runs/a --predictions preds.jsonl --out results.jsonl

      featdel evaluate runs/a --predictions preds.jsonl -j 2 --sandbox docker
    """
    from featdel.cli.summaries import grade_summary
    from featdel.core.progress import StepProgress
    from featdel.core.rundir import RunDir
    from featdel.grading.evaluate import evaluate as grade_all
    from featdel.grading.evaluate import read_predictions
    from featdel.sandboxes import get_backend

    run_dir = run_arg(ctx, run_dir, tasks, "--tasks")
    with cli_errors(verbose):
        RunDir(run_dir).need(RunDir(run_dir).tasks_dir, "run `featdel package DIR` first")
        backend = get_backend(sandbox)
        ids = [p.instance_id for p in read_predictions(predictions)]
        with StepProgress("grading", ids) as progress:
            results = grade_all(run_dir, predictions, out, backend, jobs=workers, allow_suspect=allow_suspect,
                                timeout_s=timeout, on_step=progress.step)
        grade_summary(results)
        typer.echo(f"{len(results)} results in {out}")


def version() -> None:
    """Print featdel's version.

    Example: featdel version
    """
    from featdel import __version__

    typer.echo(__version__)


def _mined_or_exit(records) -> None:
    """Print the mining table; exit 1 when nothing usable was mined."""
    from featdel.cli.summaries import repo_table
    from featdel.core.records import RepoStatus

    repo_table(records)
    if not any(r.status == RepoStatus.MINED for r in records):
        typer.secho("nothing usable was mined", fg="red", err=True)
        raise typer.Exit(1)


def _register_subcommands() -> None:
    # In the order of `featdel --help`. No import guard: a command module that fails to import
    # is a bug to see, not a group to hide.
    from featdel.cli.solve import register as register_solve  # solve, monitor

    register_solve(app)
    from featdel.cli.train import register as register_train

    register_train(app)
    from featdel.cli.model import model_app

    app.add_typer(model_app, name="model", rich_help_panel=LEARN)
    from featdel.cli.curriculum import curriculum_app

    app.add_typer(curriculum_app, name="curriculum", rich_help_panel=LEARN)
    from featdel.cli.data import register  # env build, export, publish, fetch

    register(app)
    app.command(rich_help_panel=SETUP)(version)
    from featdel.cli.sandbox import sandbox_app

    app.add_typer(sandbox_app, name="sandbox", rich_help_panel=SETUP)


_register_subcommands()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

"""`featdel solve` and `featdel monitor`: run a served model (or a checkpoint) as the learner, and
read what learners did for attempts to game the task. Each command parses options and calls one
library function (`featdel.agent.solve.solve`, `featdel.monitor.report.monitor`); `register(app)` adds
them to the main app, and imports happen inside the commands so `featdel --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import (
    LEARN,
    RunArg,
    Sandbox,
    SandboxName,
    TasksAlias,
    Verbose,
    cli_errors,
    run_arg,
)


def monitor(
    trajectories: Annotated[list[Path], typer.Argument(help="Trajectory JSONL files (featdel solve's, the trainer's).")],
    run: Annotated[Path | None, typer.Option("--run", help="Store the flags in RUN/curriculum.duckdb.")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Store the flags in this curriculum database.")] = None,
    learner: Annotated[str, typer.Option("--learner", help="The learner the trajectories belong to (stored).")] = "",
    judge_url: Annotated[str | None, typer.Option("--judge-url", help="OpenAI-compatible server of an LLM judge "
                                                  "(a second opinion after the rules).")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="The judge's model name.")] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the report (flags, per rule, per task) "
                                             "as JSON.")] = None,
    verbose: Verbose = False,
) -> None:
    """Flag attempts to reach the deleted code or game the grader in learners' trajectories.

    Deterministic rules first (caches, .git, bytecode, installed copies, built output and source
    maps, network, test edits, the grader's report, paths outside the tree; each in the task's
    language), then an optional LLM judge (key in FEATDEL_API_KEY).
    Flags are findings, not errors: the exit status is 0. See docs/solve_and_monitor.md.

    Examples:

      featdel monitor runs/a/solve/trajectories.jsonl --run runs/a --learner gpt-x

      featdel monitor traj.jsonl --judge-url http://127.0.0.1:8000/v1 --judge-model qwen --out flags.json
    """
    import json

    from featdel.core.errors import FeatdelError

    with cli_errors(verbose):
        if run is not None and db is not None:
            raise FeatdelError("give --run or --db, not both")
        if bool(judge_url) != bool(judge_model):
            raise FeatdelError("the judge needs both --judge-url and --judge-model")
        from featdel.monitor.report import monitor as run_monitor
        from featdel.monitor.report import print_report

        judge = None
        if judge_url:
            from featdel.core.llm import ChatClient
            from featdel.monitor.judge import JUDGE_MAX_TOKENS, Judge

            judge = Judge(ChatClient(judge_url, judge_model, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS))
        if run is not None:
            from featdel.core.store import default_path

            db = default_path(run)
        report = run_monitor(trajectories, judge=judge, db=db, learner=learner)
        print_report(report)
        if db is not None:
            typer.echo(f"{report.stored} new flags in {db}")
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report.to_json(), indent=1) + "\n")
            typer.echo(f"report in {out}")


def solve(
    ctx: typer.Context,
    run_dir: RunArg = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="SWE-bench predictions (JSON Lines); appended, so a "
                                      "rerun skips the tasks already there.")] = Path("preds.jsonl"),
    agent_url: Annotated[str | None, typer.Option("--agent-url", help="OpenAI-compatible server of the model, "
                                                  "e.g. http://127.0.0.1:8000/v1 (key in FEATDEL_API_KEY).")] = None,
    agent_model: Annotated[str | None, typer.Option("--agent-model", help="The model name the server serves.")]
    = None,
    policy: Annotated[Path | None, typer.Option("--policy", help="A `featdel train` checkpoint instead of a "
                                                "server (needs featdel\\[train]).")] = None,
    ids: Annotated[Path | None, typer.Option("--ids", help="Only these instance ids (one per line, e.g. from "
                                             "`featdel curriculum sample`).")] = None,
    trajectories: Annotated[Path | None, typer.Option("--trajectories", help="Trajectories JSONL (default: "
                                                      "OUT with _trajectories.jsonl).")] = None,
    workers: Annotated[int, typer.Option("--workers", "-j", min=1, help="Tasks solved in parallel.")] = 1,
    max_turns: Annotated[int, typer.Option("--max-turns", min=1, help="Tool calls per task.")] = 30,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Sampling temperature sent to the "
                                                      "server (default: the server's).")] = None,
    max_reply_tokens: Annotated[int | None, typer.Option("--max-reply-tokens", min=1, help="Cap on each reply's "
                                                         "tokens, sent to the server (default: the server's).")]
    = None,
    grade: Annotated[bool, typer.Option("--grade/--no-grade", help="Grade each final patch for a quick "
                                        "pass/fail (featdel evaluate grades the predictions either way).")] = True,
    sandbox: Sandbox = SandboxName.local,
    verbose: Verbose = False,
    tasks: TasksAlias = None,
) -> None:
    """Run a served model (or a checkpoint) as the learner on packaged tasks.

    The model works through the learner's tools (list_dir, read_file, write_file, apply_patch,
    run_tests in the sandbox, submit). Writes SWE-bench predictions for `featdel evaluate` and
    one trajectory per task for `featdel monitor`. A task whose model server fails is an error
    record (not written to OUT, so a rerun retries it); the batch goes on.

    Examples:

      featdel solve runs/a --agent-url http://127.0.0.1:8000/v1 --agent-model qwen --out preds.jsonl

      featdel solve runs/a --ids next.txt --policy ckpt/step-400 --out preds.jsonl -j 2
    """
    from featdel.core.errors import FeatdelError

    run_dir = run_arg(ctx, run_dir, tasks, "--tasks")
    with cli_errors(verbose):
        if (policy is None) == (agent_url is None) or (agent_url is not None and not agent_model):
            raise FeatdelError("give either --agent-url URL --agent-model NAME, or --policy CHECKPOINT")
        from featdel.agent.episode import EpisodeConfig
        from featdel.agent.solve import ChatLearner, PolicyLearner, instance_ids, trajectories_path
        from featdel.agent.solve import solve as run_solve
        from featdel.core.progress import StepProgress
        from featdel.core.rundir import RunDir
        from featdel.sandboxes import get_backend

        RunDir(run_dir).need(RunDir(run_dir).tasks_dir, "run `featdel package DIR` first")
        chosen = instance_ids(run_dir, ids)
        config = EpisodeConfig(max_turns=max_turns)
        if policy is not None:
            learner, model = PolicyLearner(_load_policy(policy), config), str(policy)
        else:
            from featdel.core.llm import ChatClient

            client = ChatClient(agent_url, agent_model, temperature=temperature, max_tokens=max_reply_tokens)
            learner = ChatLearner(client, config)
            model = agent_model
        traj_path = trajectories or trajectories_path(out)
        backend = get_backend(sandbox)
        with StepProgress("solving", chosen) as progress:
            results = run_solve(run_dir, out, traj_path, learner, backend, model=model, ids=chosen, jobs=workers,
                                grade=grade, on_step=progress.step)
        _solve_table(results)
        typer.echo(f"{len(results)} tasks run: predictions in {out}, trajectories in {traj_path}; next: "
                   f"`featdel evaluate {run_dir} --predictions {out}`")


def _solve_table(results) -> None:
    import sys
    from collections import Counter

    from rich.console import Console
    from rich.table import Table

    table = Table(title="solve")
    for col in ("instance_id", "status", "reward", "turns", "ended", "seconds", "reason"):
        table.add_column(col, overflow="fold")
    for r in results:
        table.add_row(r.instance_id, r.status, f"{r.reward:g}", str(r.turns), r.ended, f"{r.seconds:.1f}",
                      r.reason[:100])
    out = Console(width=None if sys.stdout.isatty() else 160)
    out.print(table)
    counts = Counter(r.status for r in results)
    out.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "nothing to do")


def register(app: typer.Typer) -> None:
    for command in (solve, monitor):
        app.command(rich_help_panel=LEARN)(command)


def _load_policy(checkpoint: Path):
    """The checkpoint's policy (`featdel.trainer.policy_io.load_policy`), or a one-line error."""
    from featdel.core.errors import FeatdelError

    try:
        import torch  # noqa: F401
    except ImportError:
        raise FeatdelError("--policy needs torch: pip install 'featdel[train]'") from None
    if not Path(checkpoint).exists():
        raise FeatdelError(f"--policy {checkpoint} does not exist: give a checkpoint `featdel train` wrote")
    from featdel.trainer.policy_io import load_policy

    return load_policy(checkpoint)

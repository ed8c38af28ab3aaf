"""`featdel solve` and `featdel monitor`: run a served model (or a checkpoint) as the learner, and
read what learners did for attempts to game the task. Each command parses options and calls one
library function (`featdel.solve.solve`, `featdel.monitor.report.monitor`); `register(app)` adds
them to the main app, and imports happen inside the commands so `featdel --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")]


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

    Deterministic rules first (caches, .git, bytecode, installed copies, network, test edits, the
    grader's report, paths outside the tree), then an optional LLM judge (key in FEATDEL_API_KEY).
    Flags are findings, not errors: the exit status is 0. See docs/solve_and_monitor.md.

    Examples:

      featdel monitor runs/a/solve/trajectories.jsonl --run runs/a --learner gpt-x

      featdel monitor traj.jsonl --judge-url http://127.0.0.1:8000/v1 --judge-model qwen --out flags.json
    """
    import json

    from featdel.cli import cli_errors
    from featdel.errors import FeatdelError

    with cli_errors(verbose):
        if run is not None and db is not None:
            raise FeatdelError("give --run or --db, not both")
        if bool(judge_url) != bool(judge_model):
            raise FeatdelError("the judge needs both --judge-url and --judge-model")
        from featdel.monitor.report import monitor as run_monitor
        from featdel.monitor.report import print_report

        judge = None
        if judge_url:
            from featdel.llm import ChatClient
            from featdel.monitor.judge import Judge

            judge = Judge(ChatClient(judge_url, judge_model, temperature=0.0))
        if run is not None:
            from featdel.curriculum.store import default_path

            db = default_path(run)
        report = run_monitor(trajectories, judge=judge, db=db, learner=learner)
        print_report(report)
        if db is not None:
            typer.echo(f"{report.stored} new flags in {db}")
        if out is not None:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report.to_json(), indent=1) + "\n")
            typer.echo(f"report in {out}")


def register(app: typer.Typer) -> None:
    for command in (monitor,):
        app.command()(command)

"""`featdel curriculum ...`: record graded attempts, show pass-rate posteriors, sample tasks.

Each command parses options and calls the library (`featdel.curriculum.*`); duckdb, numpy and
pyarrow are imported inside the commands so `featdel --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import CONTEXT, RunAlias, Verbose, cli_errors, run_arg

curriculum_app = typer.Typer(
    help="Learner pass rates: record graded attempts, Beta posteriors per task, learnability sampling.",
    no_args_is_help=True,
    context_settings=CONTEXT,
)

RunArg = Annotated[Path | None, typer.Argument(metavar="RUN", show_default=False, help="The packaged run "
                                               "directory (its tasks/ and curriculum.duckdb).")]
DbOpt = Annotated[Path | None, typer.Option("--db", help="Attempts file (default: RUN/curriculum.duckdb).")]
LearnerOpt = Annotated[str | None, typer.Option("--learner", help="Only this learner's attempts (default: all).")]


def _db(run: Path, db: Path | None) -> Path:
    from featdel.core.store import default_path

    return db or default_path(run)


@curriculum_app.command()
def record(
    ctx: typer.Context,
    learner: Annotated[str, typer.Option("--learner", help="Name of the learner these attempts belong to.")],
    run: RunArg = None,
    results: Annotated[Path | None, typer.Argument(metavar="RESULTS", show_default=False,
                                                   help="RESULTS.jsonl written by `featdel evaluate`.")] = None,
    db: DbOpt = None,
    round_: Annotated[int | None, typer.Option("--round", help="Round or step (default: the learner's last + 1).")]
    = None,
    verbose: Verbose = False,
    run_alias: RunAlias = None,
) -> None:
    """Load graded attempts into the attempts table (one row per result; safe to run twice).

    `broken` results are kept but never count as failures. Several processes may record at once.

    Examples:

      featdel curriculum record runs/a results.jsonl --learner policy-v3

      featdel curriculum record runs/a results.jsonl --learner policy-v3 --round 12
    """
    from featdel.core import store

    if run_alias is not None and results is None:  # the old order: RESULTS --run RUN
        run, results = None, run
    run = run_arg(ctx, run, run_alias, "--run")
    if results is None:
        raise typer.BadParameter("missing: give RUN, then the results of `featdel evaluate`", ctx=ctx,
                                 param_hint="'RESULTS'")
    with cli_errors(verbose):
        path = _db(run, db)
        attempts, new, rnd = store.record_results(path, results, learner, round=round_)
        broken = sum(1 for a in attempts if a.status == "broken")
        typer.echo(f"{new} new attempts of {len(attempts)} in {path} (learner {learner}, round {rnd}; "
                   f"{broken} broken, not counted as failures)")
        if (run / "tasks").is_dir():
            from featdel.curriculum.posterior import task_rows

            known = {row["instance_id"] for row in task_rows(run)}
            unknown = {a.instance_id for a in attempts} - known
            if unknown:
                typer.secho(f"{len(unknown)} instance ids are not tasks of {run} (e.g. {min(unknown)}): "
                            "stats and sample ignore them", fg="yellow", err=True)


@curriculum_app.command()
def stats(
    ctx: typer.Context,
    run: RunArg = None,
    db: DbOpt = None,
    learner: LearnerOpt = None,
    plot: Annotated[Path | None, typer.Option("--plot", help="Write a PNG: pass-rate histogram and predicted "
                                              "against observed (needs featdel\\[plot]).")] = None,
    top: Annotated[int, typer.Option("--top", min=0, help="Tasks to list, most learnable first.")] = 10,
    verbose: Verbose = False,
    run_alias: RunAlias = None,
) -> None:
    """Beta posterior of each task's pass rate, summaries, and the difficulty model's calibration.

    Summaries per strategy, repo and difficulty bucket; calibration as the Brier score and the
    share of tasks within 0.15 of their observed pass rate.

    Examples:

      featdel curriculum stats runs/a

      featdel curriculum stats runs/a --learner policy-v3 --plot passrates.png
    """
    from featdel.curriculum import report

    run = run_arg(ctx, run, run_alias, "--run")
    with cli_errors(verbose):
        report.print_stats(run, _db(run, db), learner=learner, plot=plot, top=top)


@curriculum_app.command()
def sample(
    ctx: typer.Context,
    n: Annotated[int, typer.Option("-n", min=1, help="How many instance ids to draw.")],
    run: RunArg = None,
    db: DbOpt = None,
    learner: LearnerOpt = None,
    band: Annotated[tuple[float, float], typer.Option("--band", help="Keep tasks whose posterior mean pass "
                                                      "rate is in [LO, HI].")] = (0.0, 1.0),
    seed: Annotated[int, typer.Option("--seed", help="Seed of the draw (same seed, same ids).")] = 0,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write the ids here (default: stdout).")] = None,
    verbose: Verbose = False,
    run_alias: RunAlias = None,
) -> None:
    """Draw instance ids, one per line, weighted by learnability p(1-p) under each task's posterior.

    Unseen tasks are explored; tasks always or never solved (strong evidence) are retired.

    Examples:

      featdel curriculum sample runs/a -n 64 --seed 1 > next.txt

      featdel curriculum sample runs/a -n 32 --band 0.2 0.8 --learner policy-v3 -o next.txt
    """
    from featdel.core.errors import FeatdelError
    from featdel.curriculum import report

    run = run_arg(ctx, run, run_alias, "--run")
    with cli_errors(verbose):
        try:
            ids = report.sample_ids(run, _db(run, db), n=n, learner=learner, band=band, seed=seed)
        except ValueError as exc:
            raise FeatdelError(str(exc)) from None
        text = "".join(f"{i}\n" for i in ids)
        if out:
            out.write_text(text)
            typer.echo(f"{len(ids)} instance ids in {out}", err=True)
        else:
            typer.echo(text, nl=False)

"""`featdel train`: Targeted RL on a run's task shards. Parses options and calls
`featdel.trainer.rl_train.train_rl`; under `torchrun` every rank runs this same command."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def train(
    tasks: Annotated[Path, typer.Option("--tasks", help="A run directory with packaged tasks (`featdel run`).")],
    preset: Annotated[str, typer.Option("--preset", help="debug (CI, seconds), tiny (CPU), small, medium (GPU): "
                                        "model, rollouts per task, budgets and step sizes.")] = "debug",
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="Steps to reach (default: the preset's); "
                                              "raise it to continue a finished run.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Checkpoints, metrics.jsonl, trajectories/ (the same "
                                      "command resumes from here).")] = Path("runs/train"),
    sandbox: Annotated[str, typer.Option("--sandbox", help="Where rollouts run their tests: local or docker.")] = "local",
    seed: Annotated[int, typer.Option("--seed", help="Model init, task draws and sampling.")] = 0,
    hints: Annotated[bool, typer.Option("--hints/--no-hints", help="Targeted distillation on hinted turns "
                                        "(off: the trajectory objective alone).")] = True,
    teacher: Annotated[str | None, typer.Option("--teacher", help="live, frozen or ema weights for the "
                                                "teacher (default: the preset's).")] = None,
    learner: Annotated[str | None, typer.Option("--learner", help="Name in the attempts table (default: "
                                                "train:<out folder>).")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Curriculum database for the attempts (default: "
                                            "the run's curriculum.duckdb).")] = None,
    model: Annotated[Path | None, typer.Option("--model", help="A local Hugging Face checkpoint to train instead "
                                               "of the preset's model (needs featdel[hf]).")] = None,
    device: Annotated[str, typer.Option("--device", help="cpu or cuda (one GPU per rank).")] = "cpu",
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")] = False,
) -> None:
    """Train a policy with Targeted RL on a run's tasks: the curriculum sampler draws tasks, k
    rollouts each run in sandboxes, the grader's reward and hint-targeted distillation update the
    model (Sharded Muon, FSDP2 on the dual mesh under torchrun), attempts go to the run's
    curriculum database every step. Ctrl-C and run the same command again to resume.

    Examples:

      featdel train --tasks runs/demo --preset debug --steps 4 --out runs/train-debug

      featdel train --tasks runs/demo --preset tiny --no-hints --seed 1 --out runs/tiny-nohints

      torchrun --nproc-per-node 2 $(which featdel) train --tasks runs/demo --preset debug --out runs/t2
    """
    from featdel.cli.options import cli_errors

    with cli_errors(verbose):
        try:
            import torch  # noqa: F401
        except ImportError:
            from featdel.core.errors import FeatdelError

            raise FeatdelError("the trainer needs torch: pip install 'featdel[train]'") from None
        from featdel.trainer.launch import distributed
        from featdel.trainer.rl_train import RLTrainOptions, train_rl

        opts = RLTrainOptions(tasks=tasks, out=out, preset=preset, steps=steps, seed=seed, sandbox=sandbox,
                              hints=hints, teacher=teacher, learner=learner, db=db, model_path=model, device=device)
        with distributed(device) as (rank, world):
            summary = train_rl(opts, log=typer.echo if rank == 0 else None)
        if rank == 0:
            for iid, why in summary.skipped_tasks.items():
                typer.secho(f"skipped {iid}: {why}", fg="yellow")
            rewards = ("-" if summary.first_reward is None else
                       f"{summary.first_reward:.2f} -> {summary.last_reward:.2f}")
            typer.echo(f"ran {summary.steps_run} steps (now at {summary.last_step}); mean reward {rewards}; "
                       f"{summary.attempts} attempts recorded; checkpoint {summary.checkpoint or '-'}; "
                       f"metrics {out / 'metrics.jsonl'}")


def register(app: typer.Typer) -> None:
    app.command("train")(train)

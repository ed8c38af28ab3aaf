"""`featdel train`: Targeted RL on a run's task shards. Parses options and calls
`featdel.trainer.rl_train.train_rl`; under `torchrun` every rank runs this same command."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import (
    LEARN,
    Sandbox,
    SandboxName,
    TasksAlias,
    Verbose,
    cli_errors,
    plain,
    run_arg,
)
from featdel.trainer.rl_presets import PRESETS  # plain dataclasses, no torch at --help

Preset = StrEnum("Preset", {name: name for name in PRESETS})


class Teacher(StrEnum):  # featdel.trainer.rl.TEACHERS (that module imports torch; tests/test_cli.py checks)
    live = "live"
    frozen = "frozen"
    ema = "ema"


class Device(StrEnum):  # what featdel.trainer.launch.distributed sets up: gloo on cpu, nccl on cuda
    cpu = "cpu"
    cuda = "cuda"


def train(
    ctx: typer.Context,
    run_dir: Annotated[Path | None, typer.Argument(metavar="RUN", show_default=False, help="A run directory with "
                                                   "packaged tasks (`featdel run`).")] = None,
    preset: Annotated[Preset, typer.Option("--preset", callback=plain, help="debug (CI, seconds), smoke (a "
                                           "pretrained --model in CI), tiny (CPU), small, medium (GPU): model, "
                                           "rollouts per task, budgets and step sizes.")] = "debug",
    steps: Annotated[int | None, typer.Option("--steps", min=1, help="Steps to reach (default: the preset's); "
                                              "raise it to continue a finished run.")] = None,
    out: Annotated[Path, typer.Option("--out", help="Checkpoints, metrics.jsonl, trajectories/ (the same "
                                      "command resumes from here).")] = Path("runs/train"),
    sandbox: Sandbox = SandboxName.local,
    seed: Annotated[int, typer.Option("--seed", help="Model init, task draws and sampling.")] = 0,
    hints: Annotated[bool, typer.Option("--hints/--no-hints", help="Targeted distillation on hinted turns "
                                        "(off: the trajectory objective alone).")] = True,
    teacher: Annotated[Teacher | None, typer.Option("--teacher", callback=plain, help="live, frozen or ema "
                                                    "weights for the teacher (default: the preset's).")] = None,
    learner: Annotated[str | None, typer.Option("--learner", help="Name in the attempts table (default: "
                                                "train:<out folder>).")] = None,
    db: Annotated[Path | None, typer.Option("--db", help="Curriculum database for the attempts (default: "
                                            "the run's curriculum.duckdb).")] = None,
    model: Annotated[Path | None, typer.Option("--model", help="A local Hugging Face checkpoint folder, or a "
                                               "named model (featdel model list), to train instead of the "
                                               "preset's model (needs featdel\\[hf]).")] = None,
    device: Annotated[Device, typer.Option("--device", callback=plain, help="cpu or cuda (one GPU per rank).")]
    = Device.cpu,
    verbose: Verbose = False,
    tasks: TasksAlias = None,
) -> None:
    """Train a policy with Targeted RL on a run's tasks; Ctrl-C and run it again to resume.

    The curriculum sampler draws tasks, k rollouts each run in sandboxes, the grader's reward and
    hint-targeted distillation update the model (Sharded Muon, FSDP2 on the dual mesh under
    torchrun), attempts go to the run's curriculum database every step.

    Examples:

      featdel train runs/demo --preset debug --steps 4 --out runs/train-debug

      featdel train runs/demo --preset tiny --no-hints --seed 1 --out runs/tiny-nohints

      featdel train runs/demo --model smollm2-135m-instruct --preset debug --out runs/smol

      torchrun --nproc-per-node 2 $(which featdel) train runs/demo --preset debug --out runs/t2
    """
    run_dir = run_arg(ctx, run_dir, tasks, "--tasks")
    with cli_errors(verbose):
        try:
            import torch  # noqa: F401
        except ImportError:
            from featdel.core.errors import FeatdelError

            raise FeatdelError("the trainer needs torch: pip install 'featdel[train]'") from None
        from featdel.trainer.launch import distributed
        from featdel.trainer.rl_train import RLTrainOptions, train_rl

        opts = RLTrainOptions(tasks=run_dir, out=out, preset=preset, steps=steps, seed=seed, sandbox=sandbox,
                              hints=hints, teacher=teacher, learner=learner, db=db, model_path=model, device=device)
        with distributed(device) as (rank, _world):
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
    app.command("train", rich_help_panel=LEARN)(train)

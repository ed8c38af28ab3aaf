"""`featdel env build`, `featdel export`, `featdel publish`, `featdel fetch`: the commands that
take packaged shards elsewhere (another machine's cache or docker, SWE-bench and Harbor
consumers, the Hub). Each parses options and calls one library function; `register(app)` adds
them to the main app, and imports happen inside the commands so `featdel --help` stays instant.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import (
    CONTEXT,
    SHARE,
    SandboxName,
    Verbose,
    cli_errors,
    plain,
    renamed,
)
from featdel.core.text import counted

RunDirArg = Annotated[Path, typer.Argument(metavar="RUN", help="A packaged run directory (tasks/ and envs/ shards).")]

env_app = typer.Typer(help="Environments from the shards alone: rebuild them here or as docker images.",
                      no_args_is_help=True, context_settings=CONTEXT)


class ExportFormat(StrEnum):
    swebench = "swebench"
    swebench_taskrepo = "swebench-taskrepo"
    harbor = "harbor"
    skyrl = "skyrl"


_EXPORTERS = {"swebench": "featdel.interop.swebench", "swebench-taskrepo": "featdel.interop.taskrepo",
              "harbor": "featdel.interop.harbor", "skyrl": "featdel.interop.skyrl"}


@env_app.command("build")
def env_build(
    ctx: typer.Context,
    run_dir: RunDirArg,
    sandbox: Annotated[SandboxName, typer.Option("--sandbox", callback=plain, help="local (this machine's cache) "
                                                 "or docker (an image featdel-env:<env_id>).")] = SandboxName.local,
    only: Annotated[str | None, typer.Option("--only", help="Build only this env_id.")] = None,
    tasks: Annotated[bool, typer.Option("--tasks", help="docker: also each task's start-state image "
                                        "featdel-task:<instance_id>, /testbed a git repository (SWE-bench's harness).")]
    = False,
    verbose: Verbose = False,
    backend: Annotated[SandboxName | None, typer.Option("--backend", hidden=True, callback=plain,
                                                        help="Old spelling of --sandbox.")] = None,
) -> None:
    """Rebuild every environment of a run from its env rows (snapshot + lock).

    local: into the featdel cache (FEATDEL_CACHE), where `featdel evaluate` finds it. docker:
    an image with the venv at /opt/featdel/venv and an empty /testbed, named from the env_id
    (what the SWE-bench and Harbor exports name). Wheels are fetched on the host. A JavaScript
    env runs `npm ci` on the row's recorded lock, on the host; its image holds node at
    /usr/local/bin and the install at /node_modules.

    Examples:

      featdel env build runs/a

      featdel env build runs/a --sandbox docker --only inflection-0.5.1-3f2a9c0d1e2b4a5c

      featdel env build runs/a --sandbox docker --tasks
    """
    from featdel.core.progress import StepProgress
    from featdel.core.rundir import RunDir
    from featdel.env.envbuild import build_all
    from featdel.lang import rebuild_env

    backend = renamed(ctx, "sandbox", sandbox, backend, "--backend", "--sandbox")
    if tasks and backend != "docker":
        raise typer.BadParameter("start-state images are docker images: add --sandbox docker", param_hint="--tasks")
    with cli_errors(verbose):
        from featdel.core.shards import env_rows, task_rows

        ids = [r.env_id for r in env_rows(run_dir, only)]
        with StepProgress(f"building ({backend})", ids) as progress:
            built = build_all(run_dir, backend=backend, only=only, on_step=progress.step, build=rebuild_env)
        if tasks and not any(b.status == "failed" for b in built):
            from featdel.env import taskimage

            task_ids = [t.instance_id for t in task_rows(run_dir) if t.env_id in set(ids)]
            with StepProgress("start-state images", task_ids) as progress:
                built += taskimage.build_all(run_dir, only_env=only, on_step=progress.step)
        for b in built:
            line = f"{b.status:8} {b.env_id}  {b.where or b.reason}"
            typer.secho(line, fg="red" if b.status == "failed" else None)
        if any(b.status == "failed" for b in built):
            raise typer.Exit(1)
        typer.echo(f"{counted(len(ids), 'environment')} ready for `featdel evaluate {RunDir(run_dir).root}"
                   + (" --sandbox docker`" if backend == "docker" else "`")
                   + (f", {counted(len(built) - len(ids), 'start-state image')} for SWE-bench's harness" if tasks else ""))


def export(
    run_dir: RunDirArg,
    fmt: Annotated[ExportFormat, typer.Option("--format", callback=plain, help=(
        "swebench (JSON Lines), swebench-taskrepo (swebench 5.x task repo), harbor (task folders) "
        "or skyrl (SkyRL's mini-swe-agent parquet)."))],
    out: Annotated[Path, typer.Option("--out", "-o", help="FILE.jsonl for swebench, a folder for the others.")],
    harbor_dataset: Annotated[str | None, typer.Option("--harbor-dataset", metavar="ORG/NAME", help=(
        "harbor: also write OUT/dataset.toml naming every task, as this Harbor dataset."))] = None,
    harbor_parquet: Annotated[Path | None, typer.Option("--harbor-parquet", metavar="FILE", help=(
        "harbor: also write the parquet transport RL trainers read (path, task_binary: a tar.gz of the folder)."))]
    = None,
    registry: Annotated[str | None, typer.Option("--registry", metavar="HOST:PORT", help=(
        "harbor: push each per-repo image to this registry and pin every FROM by its digest."))] = None,
    verbose: Verbose = False,
) -> None:
    """Export the tasks for other harnesses and trainers, from the same shards.

    swebench: one row per task for SWE-bench's harness (image, log_parser, eval_type,
    eval_script). swebench-taskrepo: sweb.yaml and tasks/<id>/ for `swebench eval --task-repo`.
    harbor: OUT/<instance_id>/ Harbor task folders, verified in a separate environment.
    skyrl: OUT/train.parquet and OUT/validation.parquet for SkyRL's mini-swe-agent example.
    Each image is built FROM the per-repo image: `featdel env build RUN --sandbox docker --tasks`
    builds both (swebench and skyrl name the start-state image; taskrepo and harbor build it).
    The same run exports to the same bytes.

    Examples:

      featdel export runs/a --format swebench --out runs/a/swebench.jsonl

      featdel export runs/a --format swebench-taskrepo --out runs/a/taskrepo

      featdel export runs/a --format harbor --out runs/a/harbor --harbor-dataset my-org/featdel-a

      featdel export runs/a --format harbor --out runs/a/harbor --registry 127.0.0.1:5000 --harbor-parquet a.parquet

      featdel export runs/a --format skyrl --out runs/a/skyrl
    """
    import importlib

    if (harbor_dataset or harbor_parquet or registry) and fmt != ExportFormat.harbor:
        raise typer.BadParameter("--harbor-dataset, --harbor-parquet and --registry go with --format harbor")
    with cli_errors(verbose):
        module = importlib.import_module(_EXPORTERS[fmt])
        extra = ({"dataset": harbor_dataset, "parquet": harbor_parquet, "registry": registry}
                 if fmt == ExportFormat.harbor else {})
        done = module.export(run_dir, out, **extra)
        for instance_id, why in sorted(done.left_out.items()):
            typer.secho(f"left out  {instance_id}: {why}", fg="yellow", err=True)
        for note in done.notes:
            typer.secho(f"note: {note}", fg="yellow", err=True)
        typer.echo(f"{counted(done.written, 'task')} exported to {out} ({fmt})"
                   + (f"; {len(done.left_out)} left out (above)" if done.left_out else ""))


def publish(
    run_dir: RunDirArg,
    repo_id: Annotated[str, typer.Option("--repo-id", help="The dataset on the Hub, ORG/NAME.")],
    private: Annotated[bool, typer.Option("--private", help="Create the dataset private.")] = False,
    dry_run: Annotated[Path | None, typer.Option("--dry-run", help="Write the Hub folder here; upload nothing.")]
    = None,
    verbose: Verbose = False,
) -> None:
    """Publish a packaged run as a Hugging Face dataset (`tasks` and `envs` configs, a card).

    Uploads with huggingface_hub using the token in HF_TOKEN. --dry-run DIR writes the same
    folder (README.md, tasks/*.parquet, envs/*.parquet) and uploads nothing.

    Examples:

      featdel publish runs/a --repo-id my-org/featdel-tasks --dry-run /tmp/hub

      HF_TOKEN=hf_... featdel publish runs/a --repo-id my-org/featdel-tasks --private
    """
    from featdel.interop.hub import publish as upload

    with cli_errors(verbose):
        folder = upload(run_dir, repo_id, private=private, dry_run=dry_run)
        typer.echo(f"wrote {folder} (nothing uploaded)" if dry_run else f"published {repo_id}")


def fetch(
    repo_id: Annotated[str, typer.Argument(help="ORG/NAME on the Hub, or a local folder in the Hub's layout.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The run directory to write (tasks/, envs/).")],
    verbose: Verbose = False,
) -> None:
    """Download a published featdel dataset into a run directory.

    The result is what `featdel evaluate`, `materialize`, `show` and `env build` take.

    Examples:

      featdel fetch my-org/featdel-tasks --out runs/hub

      featdel fetch /tmp/hub --out runs/hub-copy
    """
    from featdel.interop.hub import fetch as download

    with cli_errors(verbose):
        tasks, envs = download(repo_id, out)
        typer.echo(f"{tasks} tasks and {envs} environments in {out}; next: `featdel env build {out}`")


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env", rich_help_panel=SHARE)
    for command in (export, publish, fetch):
        app.command(rich_help_panel=SHARE)(command)

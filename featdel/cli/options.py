"""What the commands share: option types, the closed sets of choices, the help panels, the
error wrapper, the old spellings kept as hidden aliases, and parsers of option values.
Imports nothing of `featdel.cli`, so every command module can import it."""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

# Every group passes these on, so `-h` is `--help` for every command.
CONTEXT = {"help_option_names": ["-h", "--help"]}

# The panels of `featdel --help`, in the order a run meets them.
MAKE, INSPECT, LEARN, SHARE, SETUP = "Make tasks", "Inspect", "Grade and learn", "Share", "Setup"


class SandboxName(StrEnum):  # the keys of featdel.sandboxes.BACKENDS (tests/test_cli.py checks)
    local = "local"
    docker = "docker"


class ExecutorName(StrEnum):  # what featdel.pipeline.executor.get_executor takes
    local = "local"
    ray = "ray"


class StrategyName(StrEnum):  # the keys of featdel.deletion.registry.STRATEGIES (tests/test_cli.py checks)
    body = "body"
    function = "function"
    method = "method"
    class_ = "class"
    file = "file"
    feature = "feature"
    combine = "combine"
    agent = "agent"


def plain(value):
    """Option callback: a choice reaches the command, and so the library, as a plain str."""
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return None if value is None else str(value)


Out = Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; reused to resume).")]
Corpus = Annotated[Path | None, typer.Option("--corpus", help="TOML manifest of sources (corpora/*.toml).")]
Jobs = Annotated[int, typer.Option("--workers", "-j", min=1, help="Repositories processed in parallel.")]
Sandbox = Annotated[SandboxName, typer.Option("--sandbox", callback=plain,
                                              help="Sandbox backend: local (bubblewrap) or docker.")]
Unsafe = Annotated[bool, typer.Option("--unsafe-no-sandbox", help="Run untrusted code without isolation.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")]
ExecutorOpt = Annotated[ExecutorName, typer.Option(
    "--executor", callback=plain, help="Where mining and verification run: local (threads, -j) or ray "
    "(a Ray cluster; pip install 'featdel\\[ray]').")]
Address = Annotated[str | None, typer.Option("--address", help="Ray cluster to join with --executor ray, e.g. "
                                             "auto or HEAD:6379 (default: $RAY_ADDRESS, else a local one of -j CPUs).")]
ThresholdOpt = Annotated[list[str] | None, typer.Option(
    "--threshold", help="Override a mining threshold, e.g. min_passing=5 (repeatable; see `featdel mine --help`).")]

# RUN, the run directory a command reads, is the first argument everywhere. It is optional to
# the parser only so that an old spelling (a hidden option, below) can stand in for it.
RunArg = Annotated[Path | None, typer.Argument(metavar="RUN", show_default=False,
                                               help="A packaged run directory (tasks/ and envs/ shards).")]
TasksAlias = Annotated[Path | None, typer.Option("--tasks", hidden=True, help="Old spelling of RUN.")]
RunAlias = Annotated[Path | None, typer.Option("--run", hidden=True, help="Old spelling of RUN.")]


def _deprecated(old: str, new: str) -> None:
    typer.secho(f"note: {old} is deprecated and goes in the next release; write {new}", fg="yellow", err=True)


def run_arg(ctx: typer.Context, run: Path | None, alias: Path | None, old: str) -> Path:
    """RUN from the positional argument or its old spelling `old` (e.g. --tasks), never both."""
    if run is not None and alias is not None:
        raise typer.BadParameter(f"give the run directory once: RUN or {old} RUN (the old spelling), not both",
                                 ctx=ctx, param_hint="'RUN'")
    if alias is not None:
        _deprecated(f"{old} RUN", f"RUN as the first argument: `{ctx.command_path} {alias} ...`")
        return alias
    if run is None:
        raise typer.BadParameter("missing: give the run directory as the first argument",
                                 ctx=ctx, param_hint="'RUN'")
    return run


def renamed(ctx: typer.Context, name: str, value, alias, old: str, new: str):
    """The value of option `name` (spelled `new`) or of its hidden old spelling `old`, never both."""
    if alias is None:
        return value
    if ctx.get_parameter_source(name).name != "DEFAULT":
        raise typer.BadParameter(f"give {new} only ({old} is its old spelling)", ctx=ctx, param_hint=f"'{new}'")
    _deprecated(old, new)
    return alias


def executor_from(name: str, address: str | None, workers: int):
    from featdel.pipeline.executor import get_executor

    return get_executor(name, address=address, jobs=workers)


def thresholds_from(items: list[str] | None):
    """`featdel.pipeline.mine.Thresholds` with the --threshold KEY=VALUE overrides."""
    from featdel.pipeline.mine import Thresholds

    return Thresholds.from_overrides(items)


# `featdel -v COMMAND`: set by the app's callback for the length of one invocation.
VERBOSE: ContextVar[bool] = ContextVar("featdel_verbose", default=False)


def verbose_wanted(verbose: bool = False) -> bool:
    """The command's own -v, or the global one (`featdel -v ...`)."""
    return verbose or VERBOSE.get()


@contextlib.contextmanager
def cli_errors(verbose: bool):
    """Library errors become one line on stderr and exit code 2; tracebacks only with -v."""
    from featdel.core.errors import FeatdelError

    try:
        yield
    except FeatdelError as exc:
        if verbose_wanted(verbose):
            raise
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None

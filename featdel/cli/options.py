"""What the commands share: option types, the error wrapper, and parsers of option values.
Imports nothing of `featdel.cli`, so every command module can import it."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer

Out = Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; reused to resume).")]
Corpus = Annotated[Path | None, typer.Option("--corpus", help="TOML manifest of sources (corpora/*.toml).")]
Jobs = Annotated[int, typer.Option("--workers", "-j", min=1, help="Repositories processed in parallel.")]
Sandbox = Annotated[str, typer.Option("--sandbox", help="Sandbox backend: local (bubblewrap) or docker.")]
Unsafe = Annotated[bool, typer.Option("--unsafe-no-sandbox", help="Run untrusted code without isolation.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")]
ExecutorOpt = Annotated[str, typer.Option("--executor", help="Where mining and verification run: local "
                                          "(threads, -j) or ray (a Ray cluster; pip install 'featdel\\[ray]').")]
Address = Annotated[str | None, typer.Option("--address", help="Ray cluster to join with --executor ray, e.g. "
                                             "auto or HEAD:6379 (default: $RAY_ADDRESS, else a local one of -j CPUs).")]
ThresholdOpt = Annotated[list[str] | None, typer.Option(
    "--threshold", help="Override a mining threshold, e.g. min_passing=5 (repeatable; see `featdel mine --help`).")]


def executor_from(name: str, address: str | None, workers: int):
    from featdel.pipeline.executor import get_executor

    return get_executor(name, address=address, jobs=workers)


def thresholds_from(items: list[str] | None):
    """Parse KEY=VALUE overrides of `featdel.pipeline.mine.Thresholds`; unknown keys are one-line errors."""
    from dataclasses import fields, replace

    from featdel.core.errors import FeatdelError
    from featdel.pipeline.mine import Thresholds

    known = {f.name: f.type for f in fields(Thresholds)}
    result = Thresholds()
    for item in items or []:
        key, _, value = item.partition("=")
        if key not in known or not value:
            raise FeatdelError(f"--threshold {item!r}: use KEY=VALUE with KEY one of {', '.join(known)}")
        try:
            number = int(value) if known[key] in ("int", int) else float(value)
        except ValueError:
            raise FeatdelError(f"--threshold {item!r}: {value!r} is not a number") from None
        result = replace(result, **{key: number})
    return result


@contextlib.contextmanager
def cli_errors(verbose: bool):
    """Library errors become one line on stderr and exit code 2; tracebacks only with -v."""
    from featdel.core.errors import FeatdelError

    try:
        yield
    except FeatdelError as exc:
        if verbose:
            raise
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None

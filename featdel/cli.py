"""The `featdel` command line. Each command parses options and calls one library function;
heavy imports live inside the commands so `featdel --help` stays instant."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(
    name="featdel",
    help="Turn well-tested repositories into verified coding tasks by feature deletion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)

Out = Annotated[Path, typer.Option("--out", "-o", help="Run directory (created; reused to resume).")]
Corpus = Annotated[Path | None, typer.Option("--corpus", help="TOML manifest of sources (corpora/*.toml).")]
Jobs = Annotated[int, typer.Option("--workers", "-j", min=1, help="Repositories processed in parallel.")]
Sandbox = Annotated[str, typer.Option("--sandbox", help="Sandbox backend: local (bubblewrap) or docker.")]
Unsafe = Annotated[bool, typer.Option("--unsafe-no-sandbox", help="Run untrusted code without isolation.")]
Verbose = Annotated[bool, typer.Option("--verbose", "-v", help="Show tracebacks on errors.")]


@contextlib.contextmanager
def cli_errors(verbose: bool):
    """Library errors become one line on stderr and exit code 2; tracebacks only with -v."""
    from featdel.errors import FeatdelError

    try:
        yield
    except FeatdelError as exc:
        if verbose:
            raise
        typer.secho(f"error: {exc}", fg="red", err=True)
        raise typer.Exit(2) from None


@app.callback()
def main() -> None:
    """featdel: mine repositories, delete tested features, verify and package the tasks."""


@app.command()
def version() -> None:
    """Print featdel's version.

    Example: featdel version
    """
    from featdel import __version__

    typer.echo(__version__)


def entries_from(sources: list[str], corpus: Path | None):
    from featdel.corpus import CorpusEntry, load
    from featdel.errors import CorpusError
    from featdel.recipe import Overrides

    entries = [CorpusEntry(source=s, overrides=Overrides()) for s in sources]
    if corpus is not None:
        entries += load(corpus)
    if not entries:
        raise CorpusError("nothing to do: give SOURCE arguments or --corpus FILE")
    return entries


@app.command()
def mine(
    sources: Annotated[list[str] | None, typer.Argument(help="Local git repo, git URL[@rev] or pypi:NAME==VER.")] = None,
    out: Out = Path("runs/mine"),
    corpus: Corpus = None,
    workers: Jobs = 1,
    sandbox: Sandbox = "local",
    unsafe_no_sandbox: Unsafe = False,
    verbose: Verbose = False,
) -> None:
    """Pin repositories, build their environments, run the baseline and map coverage.

    Writes OUT/repos.jsonl (one record per repository) and OUT/repos/NAME/{baseline,coverage}.json.
    Running it again on the same --out resumes: finished repositories are not redone.

    Examples:

      featdel mine pypi:cachetools==5.5.0 --out runs/a

      featdel mine --corpus corpora/default.toml --out runs/a -j 2

      featdel mine ./my-repo https://github.com/pallets/itsdangerous.git@2.2.0 --out runs/b
    """
    from featdel.mine import mine as run_mine
    from featdel.progress import StepProgress, repo_table
    from featdel.records import RepoStatus
    from featdel.sandboxes import get_backend

    with cli_errors(verbose):
        entries = entries_from(sources or [], corpus)
        backend = get_backend(sandbox, unsafe_no_sandbox=unsafe_no_sandbox)
        with StepProgress("mining", [e.source for e in entries]) as progress:
            records = run_mine(entries, out, backend=backend, jobs=workers, on_step=progress.step)
        repo_table(records)
        if not any(r.status == RepoStatus.MINED for r in records):
            typer.secho("nothing usable was mined", fg="red", err=True)
            raise typer.Exit(1)


def _register_subcommands() -> None:
    with contextlib.suppress(ImportError):
        from featdel.cli_sandbox import sandbox_app

        app.add_typer(sandbox_app, name="sandbox")


_register_subcommands()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(app())

"""The `featdel` command line. Each command parses options and calls one library function;
heavy imports live inside the commands so `featdel --help` stays instant."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="featdel",
    help="Turn well-tested repositories into verified coding tasks by feature deletion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


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

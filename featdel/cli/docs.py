"""`python -m featdel.cli.docs > docs/cli.md`: the help of every command, as docs/cli.md holds it.

In: the live app. Out: Markdown with one section per command and subcommand, each its `--help`
exactly as typer renders it, at a fixed width and without colour, so the file changes only when
the help does. tests/test_cli.py regenerates it and fails when docs/cli.md is stale.
"""

from __future__ import annotations

import contextlib
import sys

WIDTH = 100
HEADER = """\
# The `featdel` command line

Generated from the live help: do not edit by hand; after changing a command, regenerate it with

    python -m featdel.cli.docs > docs/cli.md

(`tests/test_cli.py` fails while this file and the help disagree). Every command also takes `-h`.
"""


def command_paths(group=None, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """() for the app, then every command and subcommand, in the order `featdel --help` lists them."""
    if group is None:
        import typer.main

        from featdel.cli.main import app

        group = typer.main.get_group(app)
    paths = [prefix]
    for name, cmd in group.commands.items():
        if getattr(cmd, "commands", None) is not None:
            paths += command_paths(cmd, (*prefix, name))
        else:
            paths.append((*prefix, name))
    return paths


@contextlib.contextmanager
def fixed_console(width: int = WIDTH):
    """Typer's help console at `width` columns, no colour, whatever the terminal or $COLUMNS."""
    from typer import rich_utils

    saved = rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL
    rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL = width, None, False
    try:
        yield
    finally:
        rich_utils.MAX_WIDTH, rich_utils.COLOR_SYSTEM, rich_utils.FORCE_TERMINAL = saved


def help_text(path: tuple[str, ...], width: int = WIDTH) -> str:
    """`featdel PATH... --help` as a user sees it, without trailing spaces or blank edges."""
    from typer.testing import CliRunner

    from featdel.cli.main import app

    with fixed_console(width):
        result = CliRunner().invoke(app, [*path, "--help"], prog_name="featdel", env={"NO_COLOR": "1"})
    if result.exit_code != 0:
        raise RuntimeError(f"featdel {' '.join(path)} --help failed: {result.output}")
    return "\n".join(line.rstrip() for line in result.output.splitlines()).strip("\n")


def render(width: int = WIDTH) -> str:
    sections = [HEADER]
    for path in command_paths():
        sections.append(f"## `{' '.join(('featdel', *path))}`\n\n```text\n{help_text(path, width)}\n```\n")
    return "\n".join(sections)


if __name__ == "__main__":  # pragma: no cover
    sys.stdout.write(render())

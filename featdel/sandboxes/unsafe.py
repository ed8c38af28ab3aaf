"""The `--unsafe-no-sandbox` fallback: plain subprocesses, for machines without bubblewrap.

In: a `SandboxSpec` whose work directory is used in place (it cannot appear at another path, so
`mount_at` must equal `workdir`). Out: `RunResult`s with the same timeout, output cap and
prlimit limits as the local backend, but NO isolation: the command can read and write anything
the caller can. Every `open` warns on stderr so the choice is never silent.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes import hostpaths
from featdel.sandboxes.base import Limits, OutputSink, RunResult, SandboxSpec, Visible
from featdel.sandboxes.capture import kill_process_group, run_captured
from featdel.sandboxes.local import DEFAULT_ENV


class UnsafeBackend:
    name = "unsafe"

    def __init__(self, why: str) -> None:
        self.why = why

    def unavailable(self) -> str | None:
        return None

    def open(self, spec: SandboxSpec) -> UnsafeSandbox:
        print(f"featdel: WARNING: running untrusted code without a sandbox ({self.why})",
              file=sys.stderr)
        return UnsafeSandbox(spec)


class UnsafeSandbox:
    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.workdir = hostpaths.checked_dir(spec.workdir, "workdir")
        if spec.mount_at is not None and Path(spec.mount_at).resolve() != self.workdir:
            raise SandboxError("--unsafe-no-sandbox cannot show workdir at another path "
                               "(mount_at); install bubblewrap to test candidate copies")

    def __enter__(self) -> UnsafeSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        pass

    def visible(self) -> list[Visible]:
        """Everything: the command runs as the caller, on the host."""
        return [Visible(host=Path("/"), inside=Path("/"), writable=True, system=True)]

    def reset(self) -> None:
        pass

    def run(self, argv: Sequence[str], *, cwd: Path | None = None,
            env: Mapping[str, str] | None = None, limits: Limits | None = None,
            on_output: OutputSink | None = None) -> RunResult:
        if not argv:
            raise SandboxError("empty command: give the program and its arguments")
        limits = limits or self.spec.limits
        prlimit = shutil.which("prlimit")
        caps = [prlimit, f"--as={limits.memory_bytes}", "--"] if prlimit and limits.memory_bytes else []
        got = run_captured([*caps, *argv], env={**DEFAULT_ENV, **(env or {})},
                           cwd=str(cwd or self.workdir), timeout_s=limits.timeout_s,
                           cap=limits.output_cap_bytes, kill=kill_process_group,
                           on_output=on_output)
        return RunResult(argv=tuple(argv), exit_code=got.exit_code, stdout=got.stdout.text(),
                         stderr=got.stderr.text(), duration_s=got.duration_s,
                         timed_out=got.timed_out, killed=got.exit_code == 137,
                         stdout_truncated=got.stdout.truncated,
                         stderr_truncated=got.stderr.truncated)

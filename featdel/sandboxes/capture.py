"""Run one host process to completion with a wall-clock timeout and capped output capture.

In: an argument list (already wrapped by a backend in bwrap or prlimit), the fds it must inherit,
a timeout, an output cap and a `kill` callback that ends *every* process of the sandbox.
Out: a `Captured` record (exit code, capped stdout/stderr, duration, timed out).

Why threads: both pipes must be drained all the time, or a child that floods one of them blocks
and looks like a hang. Bytes past the cap are read and dropped, so a flood costs CPU, not memory.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from featdel.core.errors import SandboxError
from featdel.sandboxes.base import OutputSink

TIMEOUT_EXIT = 124
KILLED_EXIT = 137
_CHUNK = 65536
_DRAIN_GRACE_S = 5.0


class CappedBuffer:
    """Keeps the first `cap` bytes written to it and remembers whether more came."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._parts: list[bytes] = []
        self._size = 0
        self.truncated = False

    def add(self, data: bytes) -> None:
        room = self.cap - self._size
        if room > 0:
            kept = data[:room]
            self._parts.append(kept)
            self._size += len(kept)
        if len(data) > max(room, 0):
            self.truncated = True

    def text(self) -> str:
        return b"".join(self._parts).decode("utf-8", errors="replace")


@dataclass(frozen=True, kw_only=True, slots=True)
class Captured:
    exit_code: int
    stdout: CappedBuffer
    stderr: CappedBuffer
    duration_s: float
    timed_out: bool


def _drain(pipe: IO[bytes], buf: CappedBuffer, name: str, sink: OutputSink | None) -> None:
    fd = pipe.fileno()
    while chunk := os.read(fd, _CHUNK):
        buf.add(chunk)
        if sink is not None:
            sink(name, chunk)


def kill_process_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group the backend started (the wrapper and bwrap's outer process)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_captured(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | None = None,
    pass_fds: Sequence[int] = (),
    timeout_s: float,
    cap: int,
    kill: Callable[[subprocess.Popen[bytes]], None],
    on_output: OutputSink | None = None,
) -> Captured:
    """Start argv in a new session, drain its pipes, kill everything at the timeout."""
    out, err = CappedBuffer(cap), CappedBuffer(cap)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
        )
    except OSError as exc:
        raise SandboxError(f"could not start {argv[0]}: {exc}") from exc
    assert proc.stdout is not None and proc.stderr is not None
    readers = [
        threading.Thread(target=_drain, args=(proc.stdout, out, "stdout", on_output), daemon=True),
        threading.Thread(target=_drain, args=(proc.stderr, err, "stderr", on_output), daemon=True),
    ]
    for reader in readers:
        reader.start()
    # Popen.wait(timeout) polls with sleeps of up to 50 ms; a waiter thread wakes at once.
    waiter = threading.Thread(target=proc.wait, daemon=True)
    waiter.start()
    try:
        waiter.join(timeout_s)
        timed_out = waiter.is_alive()
    finally:
        # Always (at exit, timeout or an interrupt of the caller): no sandbox process outlives it.
        kill(proc)
        proc.wait()
    for reader in readers:
        reader.join(timeout=_DRAIN_GRACE_S)
    if any(reader.is_alive() for reader in readers):
        kill(proc)
        for reader in readers:
            reader.join(timeout=_DRAIN_GRACE_S)
        if any(reader.is_alive() for reader in readers):
            raise SandboxError(
                "a sandboxed process survived the kill and still holds the output pipes; "
                "check that the backend's process isolation works (featdel sandbox doctor)"
            )
    proc.stdout.close()
    proc.stderr.close()
    duration = time.monotonic() - start
    code = TIMEOUT_EXIT if timed_out else _shell_code(proc.returncode)
    return Captured(exit_code=code, stdout=out, stderr=err, duration_s=duration, timed_out=timed_out)


def _shell_code(returncode: int) -> int:
    """Popen gives -N for death by signal N; report it as a shell would (128 + N)."""
    return 128 - returncode if returncode < 0 else returncode

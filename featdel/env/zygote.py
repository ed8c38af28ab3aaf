"""A pytest kept warm in a sandbox that stays open: the host's end of `featdel_zygote.py`.

In: an open sandbox that can `start` a resident command (the local backend), the env's
interpreter and plugin directory. Out: `run(...)` gives the `RunResult` a fresh
`python featdel_launch.py ARGS` (or `python -c CODE ARGS`) would have given, from a child forked
off a process that has already imported pytest; or None when the zygote could not say (it died, answered nonsense, or
was stopped), and the caller runs that command in a fresh sandbox instead, so a zygote's trouble
never becomes a run's verdict.

The child's output goes to a FIFO the host drains (capped, as a fresh run's pipes are), never
through the zygote, so no run's output is in the memory later children are forked from. After
every run the zygote kills the run's processes, empties the scratch directories and checks its
own limits and the network namespace (see featdel_zygote.py); the host then checks from outside
that the sandbox's cgroup holds exactly the processes it held when the zygote became ready. A
zygote that answers anything but clean, or that ran out of time, is closed, and the next run
starts a new one.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from featdel.env.stream import FifoReader
from featdel.sandboxes.base import MiB, RunResult

READY_S = 60.0
RESET_S = 120.0
MAX_ANSWER = 1 << 20
OUTPUT_CAP = 4 * MiB


class Zygote:
    """One warm pytest in `sandbox` (a sandbox with `start`); `close()` ends it."""

    def __init__(self, sandbox, python: str, plugin: Path, cwd: Path, env: Mapping[str, str]) -> None:
        self.launcher = str(plugin / "featdel_launch.py")
        self.resident = sandbox.start([python, str(plugin / "featdel_zygote.py")], cwd=cwd, env=dict(env))
        self.lines = Lines(self.resident.proc.stdout)
        ready = self.lines.next(time.monotonic() + READY_S) or ""
        self.loaded: frozenset[str] = frozenset()  # the top-level modules it imported before any run
        try:
            self.loaded = frozenset(json.loads(ready)["ready"])
            self.alive = True
        except (ValueError, KeyError, TypeError):
            self.alive = False
        self.processes = self.resident.processes()  # host pids of bwrap's and the zygote's: no others, ever
        if not self.alive:
            self.close()

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float,
            sealed: Path, code: str | None = None) -> RunResult | None:
        """`argv`: the launcher's arguments (pytest's), or with `code` what `python -c CODE` takes;
        `sealed`: the run's sealed directory (its output FIFO goes there). None: the zygote could
        not run it."""
        if not self.alive:
            return None
        with FifoReader(sealed, "output", OUTPUT_CAP) as output:
            command = {"argv": list(argv), "env": dict(env), "cwd": str(cwd), "launcher": self.launcher,
                       "output": str(output.path), **({} if code is None else {"code": code})}
            oom = self.resident.oom_kills()
            start = time.monotonic()
            try:
                self.resident.proc.stdin.write((json.dumps(command) + "\n").encode())
                self.resident.proc.stdin.flush()
            except OSError:
                self.close()
                return None
            line = self.lines.next(start + timeout_s)
            duration = time.monotonic() - start
            if line is None and duration >= timeout_s:
                stopped = self.resident.stopped()
                self.close()
                if stopped:
                    return None  # a run stopped the zygote (SIGSTOP): what a fresh run does decides
                return RunResult(argv=tuple(argv), exit_code=124, stdout=_text(output), stderr="",
                                 duration_s=duration, timed_out=True)
            # The reset after the run has its own time; a zygote that does not finish it is replaced
            reset = self.lines.next(time.monotonic() + RESET_S)
        try:
            code = json.loads(line or "")["exit"]
            code = None if code is None else int(code)
        except (ValueError, KeyError, TypeError):
            code = None  # no answer (it died in the run) or nonsense
        try:
            clean = json.loads(reset or "")["clean"] is True
        except (ValueError, KeyError, TypeError):
            clean = False
        if not clean or self.resident.processes() != self.processes:
            self.close()
        if code is None:
            return None  # nothing it could say for certain (its run's session leader was killed)
        killed = code == 137 or self.resident.oom_kills() > oom
        return RunResult(argv=tuple(argv), exit_code=code, stdout=_text(output), stderr="", duration_s=duration,
                         killed=killed)

    def close(self) -> None:
        self.alive = False
        self.resident.close()


def _text(output: FifoReader) -> str:
    return output.data().decode("utf-8", "replace")


class Lines:
    """Lines from a pipe, each by a deadline; what came after a line waits for the next call (the
    zygote writes a run's two answers back to back, often in one read)."""

    def __init__(self, pipe) -> None:
        self.fd, self.data = pipe.fileno(), b""

    def next(self, deadline: float) -> str | None:
        """The next line, without its newline; None at end of file, at the deadline, or when it
        is longer than MAX_ANSWER."""
        while b"\n" not in self.data:
            left = deadline - time.monotonic()
            if left <= 0 or len(self.data) > MAX_ANSWER:
                return None
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                return None
            self.data += chunk
        line, self.data = self.data.split(b"\n", 1)
        return line.decode("utf-8", "replace")

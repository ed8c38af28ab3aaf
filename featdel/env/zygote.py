"""A pytest kept warm in a sandbox that stays open: the host's end of `featdel_zygote.py`.

In: an open sandbox that can `start` a resident command (the local backend), the env's
interpreter and plugin directory. Out: `run(...)` gives the `RunResult` a fresh
`python featdel_launch.py ARGS` would have given, from a child forked off a process that has
already imported pytest; or None when the zygote could not say (it died, answered nonsense, or
never became ready), and the caller runs that command in a fresh sandbox instead, so a zygote's
trouble never becomes a run's verdict.

After every run the zygote kills the run's processes and empties the scratch directories
(see featdel_zygote.py); one that cannot, or that ran out of time, is closed and the next run
starts a new one. The owner (featdel.env.testrun.SuiteRunner) starts a new zygote for every
candidate (`renew`), so nothing one candidate's runs did can meet the next's.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from featdel.sandboxes.base import RunResult

READY_S = 60.0
MAX_ANSWER = 1 << 20


class Zygote:
    """One warm pytest in `sandbox` (a sandbox with `start`); `close()` ends it."""

    def __init__(self, sandbox, python: str, plugin: Path, cwd: Path, env: Mapping[str, str]) -> None:
        self.resident = sandbox.start([python, str(plugin / "featdel_zygote.py")], cwd=cwd, env=dict(env))
        self.alive = _readline(self.resident.proc.stdout, time.monotonic() + READY_S) == "ready"
        if not self.alive:
            self.close()

    def run(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout_s: float) -> RunResult | None:
        """`argv`: the launcher's arguments (pytest's). None: the zygote could not run it."""
        if not self.alive:
            return None
        command = json.dumps({"argv": list(argv), "env": dict(env), "cwd": str(cwd)}) + "\n"
        oom = self.resident.oom_kills()
        start = time.monotonic()
        try:
            self.resident.proc.stdin.write(command.encode())
            self.resident.proc.stdin.flush()
        except OSError:
            self.close()
            return None
        line = _readline(self.resident.proc.stdout, start + timeout_s)
        duration = time.monotonic() - start
        if line is None and duration >= timeout_s:
            self.close()
            return RunResult(argv=tuple(argv), exit_code=124, stdout="", stderr="", duration_s=duration,
                             timed_out=True)
        try:
            answer = json.loads(line or "")
            code, tail, clean = int(answer["exit"]), str(answer["tail"]), answer["clean"] is True
        except (ValueError, KeyError, TypeError):
            self.close()
            return None
        killed = code == 137 or self.resident.oom_kills() > oom
        if not clean:
            self.close()
        return RunResult(argv=tuple(argv), exit_code=code, stdout=tail, stderr="", duration_s=duration,
                         killed=killed)

    def close(self) -> None:
        self.alive = False
        self.resident.close()


def _readline(pipe, deadline: float) -> str | None:
    """One line from `pipe` by `deadline`, without its newline; None at EOF, timeout or a line
    longer than MAX_ANSWER."""
    fd, data = pipe.fileno(), b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or len(data) > MAX_ANSWER:
            return None
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\n", 1)[0].decode("utf-8", "replace")

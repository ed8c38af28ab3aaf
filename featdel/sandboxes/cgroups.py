"""Per-command cgroups (v1 or v2) for the local backend: memory, process and CPU limits, OOM
counts, and a kill switch that reaches every process of the sandbox.

In: `Limits`. Out: a `Cgroup` whose `procs_files` the launcher writes its own pid into before it
execs bwrap, so every process of the sandbox is born inside the group. `kill_all()` then ends them
all, even ones that left bwrap's process group; `oom_kills()` tells "killed for memory" apart.

v1 groups nest under the caller's own group of each controller (so a sandbox never escapes a
budget its caller was given), falling back to the hierarchy's root. v2 groups live under
`/sys/fs/cgroup/featdel`, because v2 forbids enabling controllers below a group that holds
processes. Only root can do either; without root the backend uses prlimit instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes.base import Limits

ROOT = Path("/sys/fs/cgroup")
_V1_NEEDED = ("memory", "pids")


def cgroup_version() -> str | None:
    """'v1' or 'v2' when this process can create limited cgroups, else None."""
    if os.geteuid() != 0:
        return None
    if all((ROOT / c / "cgroup.procs").exists() for c in _V1_NEEDED):
        return "v1" if all(os.access(ROOT / c, os.W_OK) for c in _V1_NEEDED) else None
    controllers = ROOT / "cgroup.controllers"
    if controllers.exists() and {"memory", "pids"} <= set(controllers.read_text().split()):
        return "v2" if os.access(ROOT, os.W_OK) else None
    return None


def _own_path(controller: str) -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path.lstrip("/")
    return ""


def _write(path: Path, value: str, *, required: bool = True) -> None:
    try:
        path.write_text(value)
    except OSError as exc:
        if required:
            raise SandboxError(f"cannot set {path} to {value}: {exc.strerror}") from exc


@dataclass(kw_only=True, slots=True)
class Cgroup:
    version: str
    dirs: list[Path]  # one per controller (v1) or a single dir (v2)
    procs_files: list[Path]

    @classmethod
    def create(cls, limits: Limits, version: str) -> Cgroup:
        name = f"featdel-{uuid.uuid4().hex[:12]}"
        group = cls._create_v1(name, limits) if version == "v1" else cls._create_v2(name, limits)
        return group

    @classmethod
    def _create_v1(cls, name: str, limits: Limits) -> Cgroup:
        controllers = ["memory", "pids"] + (["cpu"] if limits.cpus else [])
        dirs: list[Path] = []
        group = cls(version="v1", dirs=dirs, procs_files=[])
        try:
            for ctrl in controllers:
                for parent in (ROOT / ctrl / _own_path(ctrl), ROOT / ctrl):
                    with contextlib.suppress(OSError):
                        (parent / name).mkdir()
                        dirs.append(parent / name)
                        break
                else:
                    raise SandboxError(f"cannot create a {ctrl} cgroup under {ROOT / ctrl}")
            mem, pids, *cpu = dirs
            if limits.memory_bytes is not None:
                _write(mem / "memory.limit_in_bytes", str(limits.memory_bytes))
                # Without swap accounting the file is absent; with it, swap may not stretch the limit.
                _write(mem / "memory.memsw.limit_in_bytes", str(limits.memory_bytes), required=False)
            _write(pids / "pids.max", str(limits.pids) if limits.pids else "max")
            if cpu and limits.cpus:
                _write(cpu[0] / "cpu.cfs_period_us", "100000")
                _write(cpu[0] / "cpu.cfs_quota_us", str(max(1000, int(limits.cpus * 100000))))
        except BaseException:
            group.remove()
            raise
        group.procs_files = [d / "cgroup.procs" for d in dirs]
        return group

    @classmethod
    def _create_v2(cls, name: str, limits: Limits) -> Cgroup:
        parent = ROOT / "featdel"
        parent.mkdir(exist_ok=True)
        for ctrl in ("memory", "pids", "cpu"):  # one at a time: one missing must not block the rest
            _write(ROOT / "cgroup.subtree_control", f"+{ctrl}", required=False)
            _write(parent / "cgroup.subtree_control", f"+{ctrl}", required=False)
        path = parent / name
        path.mkdir()
        group = cls(version="v2", dirs=[path], procs_files=[path / "cgroup.procs"])
        try:
            if limits.memory_bytes is not None:
                _write(path / "memory.max", str(limits.memory_bytes))
                _write(path / "memory.swap.max", "0", required=False)
            _write(path / "pids.max", str(limits.pids) if limits.pids else "max")
            if limits.cpus:
                _write(path / "cpu.max", f"{max(1000, int(limits.cpus * 100000))} 100000")
        except BaseException:
            group.remove()
            raise
        return group

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (d / "cgroup.procs").read_text().split())
        return found

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.version == "v1" else "memory.events"
        with contextlib.suppress(OSError, IndexError, ValueError):
            for line in (self.dirs[0] / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        return 0

    def kill_all(self, deadline_s: float = 10.0) -> None:
        """SIGKILL every process in the group until it is empty (forks race the sweep)."""
        kill_file = self.dirs[0] / "cgroup.kill"
        if self.version == "v2" and kill_file.exists():
            _write(kill_file, "1", required=False)
        end = time.monotonic() + deadline_s
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > end:
                raise SandboxError(f"processes {sorted(pids)} survived SIGKILL in {self.dirs[0]}")
            time.sleep(0.01)

    def remove(self) -> None:
        for d in self.dirs:
            for _ in range(200):  # a killed process leaves the group a moment after it dies
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)

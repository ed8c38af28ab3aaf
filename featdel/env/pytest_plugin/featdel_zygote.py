"""A pytest kept warm inside one sandbox: each run is a child forked from a process that has
already imported pytest and featdel's launcher and plugin, so a run skips the interpreter's and
pytest's start (about 0.2 s of a 0.4 s run of a few tests).

Run as `python featdel_zygote.py` from the read-only plugin directory, in a sandbox the host
keeps open (featdel.env.zygote). It says `ready` on stdout once warm, then reads one JSON
command per line on stdin: {"argv": [pytest args], "env": {variables}, "cwd": dir}. For each it
forks a child that is what `python featdel_launch.py ARGV` would be (the same spec, channel,
tripwire and plugin; the launcher's `main`), waits for it, and then leaves the sandbox as a
fresh one would be before answering: every other process killed, /tmp, /var/tmp, /run and
/dev/shm emptied (never a path the host mounted), no System V IPC object left. The answer is one
JSON line on stdout: {"exit": status (shell style), "tail": the last of the child's output,
"clean": false when the sandbox could not be made fresh}. The host replaces a zygote that
answers anything but a clean exit, or nothing in time.

What a run cannot reach: the zygote is not dumpable (no ptrace, no /proc/PID/mem or fd of it
from a child, which runs as the same uid); the child closes the zygote's stdin and stdout before
any code of the tree runs, so it can neither read the next command nor write an answer. It can
kill the zygote: the host then has no answer, and runs that command again in a fresh sandbox.
This file runs inside the sandbox with the repository's interpreter: standard library and pytest.
"""

import ctypes
import json
import os
import shutil
import signal
import sys
import time

import featdel_launch  # binds the launcher's names; nothing of the tree is imported here
import featdel_report  # noqa: F401  (warm: the launcher imports it again from sys.modules)
import pytest  # noqa: F401

PR_SET_DUMPABLE = 4
IPC_RMID = 0
SCRATCH = ("/tmp", "/var/tmp", "/run", "/dev/shm")
TAIL = 8000


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    commands, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # the zygote's own prints can never look like an answer
    answers.write("ready\n")
    for line in commands:
        command = json.loads(line)
        answers.write(json.dumps(run(command, libc, devnull)) + "\n")
    return 0


def run(command: dict, libc, devnull: int) -> dict:
    out = os.path.join("/tmp", ".featdel-output")
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    pid = os.fork()
    if pid == 0:
        try:
            os.dup2(devnull, 0)
            os.dup2(fd, 1)
            os.dup2(fd, 2)
            os.closerange(3, 1 << 16)  # the answers' pipe and every other descriptor of the zygote
            os.setsid()
            libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the child itself is an ordinary process
            os.environ.clear()
            os.environ.update(command["env"])
            sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
            os.chdir(command["cwd"])
            sys.argv = ["featdel_launch.py", *command["argv"]]
            code = featdel_launch.main()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code & 0xFF)
    os.close(fd)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    swept = sweep()
    tail = _tail(out)
    emptied = empty_scratch(libc)
    return {"exit": 128 - code if code < 0 else code, "tail": tail, "clean": swept and emptied,
            "swept": swept, "emptied": emptied}


def sweep() -> bool:
    """Kill every process of the sandbox but pid 1 (bubblewrap's) and this one, until none is
    left; reap those that were ours. False if one would not go."""
    me = os.getpid()
    for attempt in range(400):  # a killed process takes a moment to go: 2 s at most
        if attempt:
            time.sleep(0.005)
        others = [p for p in _pids() if p not in (1, me) and not _zombie(p)]
        if not others:
            return True
        for p in others:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
    return False


def empty_scratch(libc) -> bool:
    """Empty the scratch directories, never touching a path the host mounted below one (a cache
    under /tmp holds the tree and the venv); False if something stayed, or System V IPC objects
    outlive the run (they are removed first)."""
    mounts = _mount_points()
    ok = True
    for top in SCRATCH:
        if os.path.isdir(top):
            ok &= _empty(top, mounts)
    for kind, remove in (("shm", lambda i: libc.shmctl(i, IPC_RMID, None)),
                         ("msg", lambda i: libc.msgctl(i, IPC_RMID, None)),
                         ("sem", lambda i: libc.semctl(i, 0, IPC_RMID))):
        for ipc_id in _ipc_ids(kind):
            remove(ipc_id)
        ok &= not _ipc_ids(kind)
    return ok


def _ipc_ids(kind: str) -> list:
    """The ids of the System V objects of `kind` (shm, msg, sem) in this IPC namespace."""
    try:
        with open(f"/proc/sysvipc/{kind}") as fh:
            return [int(line.split()[1]) for line in fh.read().splitlines()[1:] if line.strip()]
    except (OSError, ValueError, IndexError):
        return []


def _empty(folder: str, mounts: set) -> bool:
    ok = True
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    for name in names:
        path = os.path.join(folder, name)
        if path in mounts:
            continue
        if any(m.startswith(path + "/") for m in mounts):
            ok &= os.path.isdir(path) and not os.path.islink(path) and _empty(path, mounts)
            continue
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, onerror=_writable)
            else:
                os.unlink(path)
        except OSError:
            pass
        ok &= not os.path.lexists(path)
    return ok


def _writable(func, path, _exc) -> None:
    """rmtree's retry for a folder a run made read-only (it is this uid's own)."""
    try:
        os.chmod(os.path.dirname(path), 0o700)
        os.chmod(path, 0o700)
        func(path)
    except OSError:
        pass


def _mount_points() -> set:
    points = set()
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            fields = line.split()
            if len(fields) > 4:
                points.add(fields[4].replace("\\040", " "))
    return points


def _pids() -> list:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return True  # gone


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, os.path.getsize(path) - TAIL))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main())

"""A pytest kept warm inside one sandbox: each run is a child forked from a process that has
already imported pytest and featdel's launcher and plugin, so a run skips the interpreter's and
pytest's start (about 0.2 s of a 0.4 s run of a few tests).

Run as `python featdel_zygote.py` from the read-only plugin directory, in a sandbox the host
keeps open (featdel.env.zygote). It says `ready` on stdout once warm, then reads one JSON
command per line on stdin: {"argv": pytest's arguments, "env": variables, "cwd": dir, "launcher":
the launcher's path, "output": a FIFO of the host's}. For each it forks a child that is what
`python featdel_launch.py ARGV` would be (the same spec, channel, tripwire and plugin; the
launcher's `main`), or, for a command with "code", what `python -c CODE ARGV` would be (the
build check's import of the package), writing its stdout and stderr to the FIFO, waits for it,
and then leaves the
sandbox as a fresh one would be before answering: every other process killed whatever state it
shows, /tmp, /var/tmp, /run, /dev/shm and /dev/mqueue emptied (never a path the host mounted),
no System V IPC object left. The answer is one JSON line on stdout: {"exit": status (shell
style), "clean": false when the sandbox could not be made fresh, a socket is left in its network
namespace, or this process's limits, nice value, CPUs, scheduling or OOM score changed (a run of
the same uid may set them, and later children would inherit them)}. The host replaces a zygote
that answers anything but clean, or nothing in time.

What a run cannot reach: the zygote is not dumpable (no ptrace, no /proc/PID/mem or fd of it
from a child, which runs as the same uid); the child closes every descriptor of the zygote
before any code of the tree runs, so it can neither read the next command nor write an answer;
no run's output passes through the zygote, so no child is forked with an earlier run's output
in its memory. It can kill or stop the zygote: the host then has no answer, and runs that
command again in a fresh sandbox.
This file runs inside the sandbox with the repository's interpreter: standard library and pytest.
"""

import atexit
import ctypes
import gc
import importlib
import json
import os
import platform
import shutil
import signal
import sys
import threading
import time

import featdel_launch  # binds the launcher's names; nothing of the tree is imported here
import featdel_report  # warm: the launcher imports it again from sys.modules
import pytest  # noqa: F401

PR_SET_DUMPABLE = 4
IOPRIO_GET = {"x86_64": 252, "aarch64": 31}  # the ioprio_get system call's number
IPC_RMID = 0
SCRATCH = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/dev/mqueue")
SOCKETS = ("tcp", "tcp6", "udp", "udp6", "raw", "raw6", "unix")


def main() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    commands, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 1)  # the zygote's own prints can never look like an answer
    os.close(devnull)
    # What a fresh run inherits from the shell that started it (the local backend's `cd`)
    started = {k: os.environ[k] for k in ("PWD", "OLDPWD") if k in os.environ}
    before = attributes()
    featdel_report.warm()  # the report plugin's check of pytest's code starts from here in every run
    # Every object the zygote holds now moves to the collector's permanent generation: a run's
    # collections (pytest collects twice at the end of each session) walk only what the run
    # made, and no page of the zygote's heap is copied into a child for the collector's writes.
    gc.collect()
    gc.freeze()
    answers.write(json.dumps({"ready": sorted({name.split(".", 1)[0] for name in sys.modules})}) + "\n")
    for line in commands:
        command = json.loads(line)
        code = run(command, libc, started)
        # The run is over when its child is: the host stops the run's clock here, and gives the
        # reset below its own (a run that leaves a million files in /tmp is not a slow run)
        answers.write(json.dumps({"exit": code}) + "\n")
        swept, emptied = sweep(), empty_scratch(libc)
        same = attributes() == before
        answers.write(json.dumps({"clean": swept and emptied and same and no_sockets(), "swept": swept,
                                  "emptied": emptied, "attributes": same}) + "\n")
    return 0


def run(command: dict, libc, started: dict):
    """The run's exit status, shell style, or None when its session leader died by a signal (a
    run that kills its parent: the host runs it fresh, where the parent is root's bwrap). Nothing
    of the run's output passes through this process: the child writes to the host's FIFO.

    A fresh run's test process is not a session leader, in a session (and CPU autogroup) of its
    own: here a first child takes a new session and forks the run's process, as bwrap does."""
    leader = os.fork()
    if leader == 0:
        try:
            os.closerange(3, 1 << 16)  # the answers' pipe and every other descriptor of the zygote
            os.setsid()
            pid = os.fork()
            if pid == 0:
                launch(command, libc, started)
            _, status = os.waitpid(pid, 0)
            code = os.waitstatus_to_exitcode(status)
            os._exit(128 - code if code < 0 else code)
        finally:
            os._exit(255)
    _, status = os.waitpid(leader, 0)
    code = os.waitstatus_to_exitcode(status)
    return None if code < 0 else code


def launch(command: dict, libc, started: dict) -> None:
    """The run's process: what `python featdel_launch.py ARGV` would be; never returns."""
    try:
        null = os.open(os.devnull, os.O_RDONLY)  # its own: flags set on it reach no one else
        output = os.open(command["output"], os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0))
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        os.close(null)
        os.close(output)
        libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)  # the child itself is an ordinary process
        os.environ.clear()
        os.environ.update({**command["env"], **started})
        sys.dont_write_bytecode = bool(os.environ.get("PYTHONDONTWRITEBYTECODE"))
        os.chdir(command["cwd"])
        importlib.invalidate_caches()  # the folders the zygote's path names were empty at its start
        if "code" in command:
            code = run_code(command["code"], command["argv"])
        else:
            sys.argv = [command["launcher"], *command["argv"]]
            code = featdel_launch.main()
        # As an interpreter's exit does: wait for non-daemon threads, then the atexit handlers
        threading._shutdown()
        atexit._run_exitfuncs()
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


def run_code(source: str, argv: list) -> int:
    """`python -c SOURCE ARGV...` in this process: the working directory first on sys.path (where
    this file's directory was), a `__main__` of its own; an uncaught exception ends it as the
    interpreter's would (the caller prints the traceback and exits 1)."""
    import builtins
    import types

    sys.argv = ["-c", *argv]
    sys.path[0] = ""
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    exec(compile(source, "<string>", "exec"), main.__dict__)
    return 0


def attributes() -> tuple:
    """What a run could set on this process from outside it (same uid) that its later children
    would inherit: resource limits, nice value, CPU affinity, scheduling policy, OOM score."""
    import resource

    limits = tuple(resource.getrlimit(getattr(resource, n)) for n in sorted(dir(resource)) if n.startswith("RLIMIT_"))
    try:
        with open("/proc/self/oom_score_adj") as fh:
            oom = fh.read()
    except OSError:
        oom = None
    return (limits, os.getpriority(os.PRIO_PROCESS, 0), sorted(os.sched_getaffinity(0)), os.sched_getscheduler(0),
            oom, _ioprio())


def _ioprio():
    """This process's I/O priority (ioprio_get(IOPRIO_WHO_PROCESS, 0)); None where unknown."""
    number = IOPRIO_GET.get(platform.machine())
    if number is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(number, 1, 0)


def no_sockets() -> bool:
    """No socket of any kind is left in the sandbox's network namespace (a TCP port in
    TIME_WAIT would refuse the next run's bind, where a fresh sandbox has a new namespace)."""
    for kind in SOCKETS:
        try:
            with open(f"/proc/net/{kind}") as fh:
                if len([line for line in fh.read().splitlines() if line.strip()]) > 1:
                    return False
        except OSError:
            pass
    return True


def sweep() -> bool:
    """Kill every process of the sandbox but pid 1 (bubblewrap's) and this one, whatever state
    /proc says it is in (a thread group whose leader exited shows `Z` while its other threads
    run), until /proc holds no other; reap those that were ours. False if one would not go."""
    me = os.getpid()
    for attempt in range(400):  # a killed process takes a moment to go: 2 s at most
        if attempt:
            time.sleep(0.005)
        others = [p for p in _pids() if p not in (1, me)]
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



if __name__ == "__main__":
    sys.exit(main())

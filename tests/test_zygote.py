"""Invariant: a run forked from a warm pytest (featdel.env.zygote) reports what a fresh run
reports, and is as independent of the runs before it: nothing a run leaves (a file in /tmp, a
process that detached, a System V shared memory segment) reaches the next; a run can neither read
the zygote (its memory, environment or descriptors) nor answer for it; a run that kills the zygote
or outlives its time gets the verdict a fresh sandbox would give. Local backend (bubblewrap): the
only one that keeps a command open.
"""

from __future__ import annotations

import json
import shutil
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

from featdel.core.records import Recipe
from featdel.env.envs import Env
from featdel.env.testrun import RunOptions, run_suite, warm_runner
from tests.conftest import hand_made_env

# A process and the processes above it up to bwrap's pid 1: all a run may see in /proc.
ANCESTRY = """
import os
def ancestry():
    pid, seen = os.getpid(), set()
    while pid:
        seen.add(pid)
        pid = int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])
    return seen
"""

TESTS = {
    "test_mod.py": "import mod\n\n\ndef test_value():\n    assert mod.VALUE == 1\n\n\n"
                   "def test_fails():\n    assert mod.VALUE == 3\n",
    # Leaves a detached process, a file in /tmp and a System V segment behind.
    "test_plant.py": """
import ctypes, os, subprocess, sys

def test_plant():
    open('/tmp/planted', 'w').write('x')
    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    libc = ctypes.CDLL(None)
    assert libc.shmget(0, 4096, 0o1600) >= 0  # IPC_PRIVATE | IPC_CREAT
""",
    # Sees nothing of the run before: no file, no process but itself and its ancestors.
    "test_clean.py": ANCESTRY + """

def test_clean():
    assert not os.path.exists('/tmp/planted')
    assert {int(p) for p in os.listdir('/proc') if p.isdigit()} == ancestry()
    assert open('/proc/sysvipc/shm').read().splitlines()[1:] == []
""",
    # Reads nothing of the zygote, and tries to answer for it on every descriptor it has.
    "test_reach.py": """
import json, os, stat

def test_reach():
    parent = os.getppid()
    for what in ('mem', 'environ', 'fd'):
        try:
            os.listdir(f'/proc/{parent}/fd') if what == 'fd' else open(f'/proc/{parent}/{what}', 'rb').read(1)
        except PermissionError:
            continue
        raise AssertionError(f'read /proc/{parent}/{what}')
    forged = (json.dumps({'exit': 0, 'tail': '', 'clean': True}) + '\\n').encode()
    for fd in os.listdir('/proc/self/fd'):
        try:
            if stat.S_ISFIFO(os.fstat(int(fd)).st_mode) and int(fd) > 2:
                os.write(int(fd), forged)
        except OSError:
            pass
    assert False, 'fails on purpose: the run must say exit 1'
""",
    # Kills every process above it that it may: the zygote too (a fresh run's are root's).
    "test_kill.py": ANCESTRY + """
import signal
def test_kill_parent():
    for pid in ancestry() - {os.getpid()}:
        try:
            os.kill(pid, signal.SIGKILL)
        except PermissionError:
            pass
""",
    "test_random.py": "import random\n\n\ndef test_random():\n    print('RANDOM', random.random())\n",
    "test_slow.py": "import time\n\n\ndef test_slow():\n    time.sleep(30)\n",
}


@pytest.fixture
def env(tmp_path) -> Env:
    """An env made by hand: this interpreter's venv (it has pytest), a one-module checkout."""
    return hand_made_env(tmp_path / "env", TESTS)


class Counted:
    """A tree per run, as verification makes one."""

    def __init__(self, env: Env, where: Path) -> None:
        self.env, self.where, self.n = env, where, 0

    def __call__(self) -> Path:
        self.n += 1
        return Path(shutil.copytree(self.env.src, self.where / str(self.n), symlinks=True))


def only(test_file: str) -> RunOptions:
    return RunOptions(timeout_s=60, tests=[test_file])


@contextmanager
def zygote_runner(env: Env, backend):
    """A warm runner that forks its runs from a zygote."""
    with warm_runner(env, backend) as runner:
        runner.zygote = True
        yield runner


def fresh_first(env: Env, backend, tmp_path: Path, test_file: str):
    """(trees, the options of a run of `test_file`, that run in a fresh sandbox)."""
    trees, options = Counted(env, tmp_path), only(test_file)
    return trees, options, run_suite(env, backend, options, tree=trees())


def zygote_pid(runner) -> int | None:
    alive = [z for z in runner._zygotes.values() if z.alive]
    return alive[0].resident.proc.pid if alive else None


def test_forked_runs_report_what_fresh_runs_report(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    options = only("tests/test_mod.py")
    fresh = run_suite(env, local_backend, options, tree=trees())
    with zygote_runner(env, local_backend) as runner:
        runs = [runner.run_suite(options, tree=trees()) for _ in range(2)]
        pid = zygote_pid(runner)
    assert fresh.broken is None, fresh.output_tail
    assert fresh.outcomes == {"tests/test_mod.py::test_value": "passed", "tests/test_mod.py::test_fails": "failed"}
    for run in runs:
        assert run.broken is None, run.output_tail
        assert (run.outcomes, run.collected, run.exit_code, run.report_exitstatus) == \
            (fresh.outcomes, fresh.collected, fresh.exit_code, fresh.report_exitstatus)
    assert pid is not None  # both came from one warm pytest, not from fresh fallbacks


def test_a_forked_run_sees_nothing_the_previous_run_left(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    with zygote_runner(env, local_backend) as runner:
        planted = runner.run_suite(only("tests/test_plant.py"), tree=trees())
        pid = zygote_pid(runner)
        clean = runner.run_suite(only("tests/test_clean.py"), tree=trees())
        assert zygote_pid(runner) == pid  # the same zygote cleaned up after the first run
    assert planted.outcomes == {"tests/test_plant.py::test_plant": "passed"}, planted.output_tail
    assert clean.outcomes == {"tests/test_clean.py::test_clean": "passed"}, clean.output_tail


def test_a_run_cannot_read_the_zygote_nor_answer_for_it(env, local_backend, tmp_path):
    trees, options, fresh = fresh_first(env, local_backend, tmp_path, "tests/test_reach.py")
    with zygote_runner(env, local_backend) as runner:
        run = runner.run_suite(options, tree=trees())
        assert zygote_pid(runner) is not None
    assert "fails on purpose" in run.output_tail  # not an assertion that it read the zygote
    assert run.exit_code == fresh.exit_code == 1  # a forged {"exit": 0} never reached the host
    # What the forgery wrote to the report's channel voids the report, in both modes alike.
    assert run.broken is not None and fresh.broken is not None and run.broken.split(":")[0] == fresh.broken.split(":")[0]


def test_a_run_that_kills_the_zygote_is_run_again_fresh(env, local_backend, tmp_path):
    trees, options, fresh = fresh_first(env, local_backend, tmp_path, "tests/test_kill.py")
    with zygote_runner(env, local_backend) as runner:
        killed = runner.run_suite(options, tree=trees())
        assert zygote_pid(runner) is None
        after = runner.run_suite(only("tests/test_mod.py"), tree=trees())
        assert zygote_pid(runner) is not None  # the next run started a new one
    assert fresh.outcomes == {"tests/test_kill.py::test_kill_parent": "passed"}, fresh.output_tail
    assert (killed.outcomes, killed.exit_code, killed.broken) == (fresh.outcomes, fresh.exit_code, None)
    assert after.outcomes["tests/test_mod.py::test_value"] == "passed"


def test_a_forked_run_out_of_time_times_out_and_the_zygote_is_replaced(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    with zygote_runner(env, local_backend) as runner:
        slow = runner.run_suite(RunOptions(timeout_s=3, tests=["tests/test_slow.py"]), tree=trees())
        assert zygote_pid(runner) is None
        after = runner.run_suite(only("tests/test_clean.py"), tree=trees())
    assert slow.timed_out and slow.broken is not None and not slow.passed()
    assert after.outcomes == {"tests/test_clean.py::test_clean": "passed"}, after.output_tail


def test_forked_runs_draw_different_random_numbers_as_fresh_runs_do(env, local_backend, tmp_path):
    """The zygote imported `random` (pytest does): without a reseed after the fork every run
    would draw the same numbers, and reruns could not see a test that fails by chance."""
    trees = Counted(env, tmp_path)
    options = RunOptions(timeout_s=60, tests=["tests/test_random.py"], extra_args=["-s"])
    with zygote_runner(env, local_backend) as runner:
        runs = [runner.run_suite(options, tree=trees()) for _ in range(3)]
        assert zygote_pid(runner) is not None
    drawn = [next(line for line in run.output_tail.splitlines() if "RANDOM" in line) for run in runs]
    assert len(set(drawn)) == 3, drawn


# Attacks an outside red team found on the first version (each made the probe fail through a
# zygote, and pass fresh): a planting run, then a probe run that must see a fresh sandbox.
ATTACKS = {
    # A thread group whose leader exited shows `Z` in /proc and kept writing the next run's tree.
    "survivor": ("""
import os, ctypes, threading, time
def test_plant():
    src = os.getcwd()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            def loop():
                while True:
                    try:
                        open(os.path.join(src, 'mod.py'), 'w').write('VALUE = 2\\n')
                    except OSError:
                        pass
                    time.sleep(0.001)
            threading.Thread(target=loop).start()
            time.sleep(0.1)
            ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the leader alone
        os._exit(0)
    os.wait()
    time.sleep(0.3)
""", ANCESTRY + """
import time
def test_probe():
    time.sleep(0.2)
    import mod
    assert mod.VALUE == 1
    assert {int(p) for p in os.listdir('/proc') if p.isdigit()} == ancestry()
"""),
    # Limits, nice value and CPUs set on the zygote (the same uid may) reached every later child.
    "limits": ("""
import os, resource
def test_plant():
    z = os.getppid()
    try:
        resource.prlimit(z, resource.RLIMIT_NOFILE, (64, 64))
        resource.prlimit(z, resource.RLIMIT_FSIZE, (4096, 4096))
        os.setpriority(os.PRIO_PROCESS, z, 19)
        os.sched_setaffinity(z, {0})
    except PermissionError:
        pass  # a fresh run's parent is root's
""", """
import os
def test_probe():
    files = [open('/dev/null') for _ in range(100)]
    open('/tmp/big', 'wb').write(b'x' * 100000)
    assert os.getpriority(os.PRIO_PROCESS, 0) == 0
"""),
    # A POSIX message queue, and a port left in TIME_WAIT, of the same namespaces.
    "kernel": ("""
import ctypes, os, socket, time
def test_plant():
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mq_open(b'/planted', os.O_CREAT | os.O_RDWR, 0o600, None) >= 0
    srv = socket.socket(); srv.bind(('127.0.0.1', 5555)); srv.listen()
    cli = socket.create_connection(('127.0.0.1', 5555)); conn, _ = srv.accept()
    conn.close(); time.sleep(0.05); cli.close(); srv.close()
""", """
import ctypes, os, socket
def test_probe():
    assert ctypes.CDLL(None).mq_open(b'/planted', os.O_RDONLY, 0o600, None) < 0
    socket.socket().bind(('127.0.0.1', 5555))
"""),
    # The zygote's memory held the last run's output, and children are copies of it.
    "memory": ("""
def test_plant():
    print('SECRET-OF-THE-FIRST-RUN-' + '7f3a9c')
    assert 0
""", """
import re
def test_probe():
    found = []
    with open('/proc/self/maps') as maps, open('/proc/self/mem', 'rb', 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in span.split('-'))
            if 'r' not in perms or hi - lo > 1 << 28:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            found += re.findall(rb'SECRET-OF-THE-FIRST-RUN-[0-9a-f]{6}', data)  # the pattern holds no digits
    assert not found
"""),
    # The staging folder is one inode for every run: its mode stayed.
    "folder": ("""
import os
def test_plant():
    os.chmod(os.getcwd(), 0o555)
""", """
def test_probe():
    open('written', 'w').write('x')
"""),
    # Flags set on a /dev/null the zygote shared with every child.
    "devnull": ("""
import fcntl, os
def test_plant():
    fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_APPEND | os.O_NONBLOCK)
""", """
import fcntl, os
def test_probe():
    assert not fcntl.fcntl(0, fcntl.F_GETFL) & (os.O_APPEND | os.O_NONBLOCK)
"""),
    # What ordinary suites see: not a session leader, $PWD set, nothing in /tmp but the parents
    # of the host's mounts.
    "ordinary": ("""
def test_plant():
    pass
""", """
import os
def test_probe():
    os.setsid()
    assert os.environ['PWD'] == os.getcwd()
    mounts = [line.split()[4] for line in open('/proc/self/mountinfo')]
    assert [n for n in os.listdir('/tmp') if not any(m.startswith('/tmp/' + n) for m in mounts)] == []
"""),
}


ATTACKS.update({
    # The zygote's I/O priority and its session's CPU autogroup, set from a run (the second red team).
    "priority": ("""
import ctypes, os, platform
def test_plant():
    number = {'x86_64': 251, 'aarch64': 30}.get(platform.machine())
    for pid in (os.getppid(), int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])):
        if number:
            ctypes.CDLL(None).syscall(number, 1, pid, 3 << 13)  # ioprio_set: the idle class
    try:
        open('/proc/self/autogroup', 'w').write('19')
    except OSError:
        pass
""", """
import ctypes, os, platform
def test_probe():
    number = {'x86_64': 252, 'aarch64': 31}.get(platform.machine())
    if number:
        assert ctypes.CDLL(None).syscall(number, 1, 0) >> 13 != 3
    if os.path.exists('/proc/self/autogroup'):
        assert open('/proc/self/autogroup').read().split()[-1] == '0'
"""),
    # The report folder is one inode for every run of a warm runner: its mode stayed.
    "report folder": ("""
import os
def test_plant():
    for line in open('/proc/self/mountinfo'):
        point = line.split()[4]
        if point.endswith('/out') and os.access(point, os.W_OK):
            os.chmod(point, 0o500)
""", """
import os
def test_probe():
    points = [line.split()[4] for line in open('/proc/self/mountinfo')]
    assert all(os.access(p, os.W_OK) for p in points if p.endswith('/out') or 'featdel-report-' in p)
"""),
})


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_what_a_run_leaves_in_the_zygote_s_sandbox_never_reaches_the_next(attack, env, local_backend, tmp_path):
    plant, probe = ATTACKS[attack]
    (env.src / "tests" / "test_plant_it.py").write_text(plant)
    (env.src / "tests" / "test_probe_it.py").write_text(probe)
    trees = Counted(env, tmp_path)
    fresh = run_suite(env, local_backend, only("tests/test_probe_it.py"), tree=trees())
    assert fresh.outcomes == {"tests/test_probe_it.py::test_probe": "passed"}, fresh.output_tail
    with zygote_runner(env, local_backend) as runner:
        runner.run_suite(only("tests/test_plant_it.py"), tree=trees())
        probed = runner.run_suite(only("tests/test_probe_it.py"), tree=trees())
        assert zygote_pid(runner) is not None
    assert probed.outcomes == fresh.outcomes, probed.output_tail


def test_a_run_that_stops_the_zygote_is_run_again_fresh(env, local_backend, tmp_path):
    (env.src / "tests" / "test_stop.py").write_text(
        "import os, signal\n\n\ndef test_stop():\n    try:\n        os.kill(os.getppid(), signal.SIGSTOP)\n"
        "    except PermissionError:\n        pass\n")
    trees = Counted(env, tmp_path)
    with zygote_runner(env, local_backend) as runner:
        run = runner.run_suite(RunOptions(timeout_s=3, tests=["tests/test_stop.py"]), tree=trees())
    assert (run.outcomes, run.timed_out, run.exit_code) == ({"tests/test_stop.py::test_stop": "passed"}, False, 0)


def test_a_forked_run_ends_as_an_interpreter_does(env, local_backend, tmp_path):
    """atexit handlers run, and the run waits for its threads, as at a fresh interpreter's exit."""
    (env.src / "tests" / "test_exit.py").write_text(
        "import atexit, threading, time\n\n\ndef test_exit():\n"
        "    atexit.register(lambda: print('ATEXIT-' + 'RAN'))\n"
        "    threading.Thread(target=lambda: (time.sleep(0.5), print('THREAD-' + 'DONE'))).start()\n")
    trees, options, fresh = fresh_first(env, local_backend, tmp_path, "tests/test_exit.py")
    with zygote_runner(env, local_backend) as runner:
        forked = runner.run_suite(options, tree=trees())
        assert zygote_pid(runner) is not None
    for run in (fresh, forked):
        assert "THREAD-DONE" in run.output_tail and "ATEXIT-RAN" in run.output_tail, run.output_tail


def test_a_zygote_never_holds_tree_code(tmp_path, local_backend):
    """A zygote starts on an empty staging folder, so it never imports a tree's module. The
    second red team installed iniconfig (which pytest imports) editable and made candidate 1's
    copy, loaded into the zygote, answer for candidate 2. Here pytest cannot start without the
    tree's iniconfig, so no zygote becomes ready and each run is fresh, with its own tree's copy."""
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    own_venv(root, root / "src", ("_pytest", "pytest", "pluggy", "py.py", "pygments", "packaging"))  # iniconfig: the tree's
    import iniconfig

    real = Path(iniconfig.__file__).parent
    (root / "src" / "tests" / "test_which.py").write_text(
        "import iniconfig, pathlib\n\n\ndef test_which():\n"
        "    assert iniconfig.FROM_TREE == pathlib.Path(__file__).parent.parent.joinpath('which').read_text()\n")
    env = Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["iniconfig"],
                                       test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))
    outcomes = []
    with zygote_runner(env, local_backend) as runner:
        for which in ("one", "two"):
            tree = Path(shutil.copytree(env.src, tmp_path / which, symlinks=True))
            shutil.copytree(real, tree / "iniconfig")
            with open(tree / "iniconfig" / "__init__.py", "a") as fh:
                fh.write(f"\nFROM_TREE = {which!r}\n")
            (tree / "which").write_text(which)
            outcomes.append(runner.run_suite(only("tests/test_which.py"), tree=tree).outcomes)
        started_empty = runner._no_zygote  # on an empty staging folder pytest could not import
    assert outcomes == [{"tests/test_which.py::test_which": "passed"}] * 2
    assert started_empty  # so both runs were fresh, each with its own tree's iniconfig


def own_venv(root: Path, on_path: Path, packages) -> None:
    """A venv at root/venv holding copies of `packages` from ours, with `on_path` (a folder of the
    checkout) on its path through a .pth line, as an editable install of a src layout leaves it."""
    import subprocess
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    site = next((root / "venv" / "lib").glob("python3*/site-packages"))
    (site / "a_tree.pth").write_text(f"{on_path}\n")
    ours = Path(sysconfig.get_paths()["purelib"])
    for name in (*packages, next(ours.glob("pytest-*.dist-info")).name):
        (shutil.copytree if (ours / name).is_dir() else shutil.copy)(ours / name, site / name)


def test_a_src_layout_installed_editable_imports_in_a_forked_run(tmp_path, local_backend):
    """The zygote starts on an empty staging folder; the folders the venv's .pth files name must
    exist then, or the interpreter leaves them off its path and no forked run finds the package
    (cachetools 5.5.0: every build check failed with `No module named 'cachetools'`)."""
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    (root / "src" / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "src" / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    (root / "src" / "tests" / "test_pkg.py").write_text("import pkg\n\n\ndef test_pkg():\n    assert pkg.VALUE == 1\n")
    own_venv(root, root / "src" / "src", ("_pytest", "pytest", "pluggy", "py.py", "iniconfig", "pygments", "packaging"))
    env = Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["src/pkg"],
                                       test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))
    trees = Counted(env, tmp_path)
    with zygote_runner(env, local_backend) as runner:
        runs = [runner.run_suite(only("tests/test_pkg.py"), tree=trees()) for _ in range(2)]
        assert zygote_pid(runner) is not None
    assert [r.outcomes for r in runs] == [{"tests/test_pkg.py::test_pkg": "passed"}] * 2, runs[0].output_tail


def test_a_tree_that_provides_a_module_the_zygote_loaded_is_seen(tmp_path):
    """Where the checkout is on the interpreter's path from the start (a .pth path line, an
    editable finder's mapping), a name the zygote loaded there sends the run fresh."""
    from featdel.env.testrun import _shadows
    from featdel.env.tools import tree_import_roots

    root = tmp_path / "env"
    site = root / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (root / "src" / "src" / "pkg").mkdir(parents=True)
    env = Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["src/pkg"], test_cmd=["python"]))
    (site / "__editable__.pkg.pth").write_text("import __editable___pkg_finder; __editable___pkg_finder.install()\n")
    (site / "__editable___pkg_finder.py").write_text(f"MAPPING: dict[str, str] = {{'pkg': '{env.src}/src/pkg'}}\n")
    tree = tmp_path / "tree"
    (tree / "src" / "pkg").mkdir(parents=True)
    roots = tree_import_roots(env)
    assert _shadows(tree, roots, frozenset({"pkg", "json"})) and not _shadows(tree, roots, frozenset({"json"}))
    (site / "plain.pth").write_text(f"{env.src}\n")
    (tree / "sitecustomize.py").write_text("")
    assert _shadows(tree, tree_import_roots(env), frozenset({"json"}))  # a start-up hook at the root the .pth names


def test_two_answers_in_one_read_are_two_lines():
    """The zygote writes a run's exit status and its reset's answer back to back; read together,
    the second must still be there for the next call (it was dropped once, and the host waited
    out the reset's whole allowance)."""
    import os
    import time

    from featdel.env.zygote import Lines

    r, w = os.pipe()
    os.write(w, b'{"exit": 0}\n{"clean": true}\n')
    with os.fdopen(r, "rb") as pipe:
        lines = Lines(pipe)
        assert [lines.next(time.monotonic() + 5), lines.next(time.monotonic() + 5)] == ['{"exit": 0}', '{"clean": true}']
        os.close(w)
        assert lines.next(time.monotonic() + 5) is None


PROBE_C = ("import sys, json; import mod; "
           "print('PROBE', json.dumps([sys.argv, sys.path[0], __name__, mod.VALUE, 'pytest' in sys.modules]))")


def _probe(result) -> list:
    return json.loads(next(ln for ln in result.stdout.splitlines() if ln.startswith("PROBE ")).removeprefix("PROBE "))


def test_a_python_c_run_is_forked_and_sees_what_a_fresh_one_sees(env, local_backend, tmp_path):
    """The build check's import (`python -c`) forks from the warm pytest: the same argv, the
    working directory first on the path, a `__main__` of its own, the tree's module; the exit
    status of a fresh interpreter (an uncaught exception is 1, `sys.exit(3)` is 3)."""
    trees = Counted(env, tmp_path)
    python = str(env.venv / "bin" / "python")
    with warm_runner(env, local_backend) as runner:
        fresh = runner.run([python, "-c", PROBE_C, "a", "b"], tree=trees())
    with zygote_runner(env, local_backend) as runner:
        forked = runner.run([python, "-c", PROBE_C, "a", "b"], tree=trees())
        raised = runner.run([python, "-c", "raise ValueError('boom')"], tree=trees())
        exited = runner.run([python, "-c", "import sys; sys.exit(3)"], tree=trees())
        assert zygote_pid(runner) is not None
    assert _probe(fresh) == [["-c", "a", "b"], "", "__main__", 1, False], fresh.stdout + fresh.stderr
    assert _probe(forked) == [["-c", "a", "b"], "", "__main__", 1, True], forked.stdout  # forked: pytest loaded
    assert raised.exit_code == 1 and "ValueError: boom" in raised.stdout
    assert exited.exit_code == 3


def test_a_python_c_run_on_a_tree_that_shadows_the_zygote_s_modules_goes_fresh(env, local_backend, tmp_path):
    """`python -c` puts the tree first on its path: a tree-level `json.py` is what a fresh run
    imports, and the zygote imported the standard library's, so that run is not forked."""
    (env.src / "json.py").write_text("FROM_TREE = True\ndef dumps(v):\n    return repr(v)\n")
    code = "import json; print('PROBE', getattr(json, 'FROM_TREE', False), 'pytest' in __import__('sys').modules)"
    with zygote_runner(env, local_backend) as runner:
        result = runner.run([str(env.venv / "bin" / "python"), "-c", code], tree=Counted(env, tmp_path)())
    assert "PROBE True False" in result.stdout, result.stdout + result.stderr


def test_a_forked_import_check_names_what_broke(env, local_backend, tmp_path):
    """The build check's import through the zygote reports the package's import error."""
    from featdel.env.buildcheck import check_and_run

    tree = Counted(env, tmp_path)()
    (tree / "mod.py").write_text("VALUE = undefined_name\n")
    with zygote_runner(env, local_backend) as runner:
        failed, suite = check_and_run(env, {"tests/test_mod.py::test_value"}, tree, runner, set())
        assert zygote_pid(runner) is not None
    assert failed == ("build.import", "the package no longer imports: NameError: name 'undefined_name' is not defined")
    assert suite is None


def test_a_tree_with_a_start_up_hook_on_the_path_runs_fresh(tmp_path, local_backend):
    """The check that sends such a tree fresh looks where the tree's entries are when the run
    starts (it once looked at the folder they had been moved out of, and forked every run): a
    `sitecustomize.py` at a root the venv's .pth names runs in a fresh interpreter's start-up, so
    the run must be a fresh one."""
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    (root / "src" / "tests" / "test_site.py").write_text(
        "import sys\n\n\ndef test_site():\n    assert getattr(sys.modules.get('sitecustomize'), 'FROM_TREE', False)\n")
    own_venv(root, root / "src", ("_pytest", "pytest", "pluggy", "py.py", "iniconfig", "pygments", "packaging"))
    env = Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["pkg"],
                                       test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))
    trees = Counted(env, tmp_path)
    with zygote_runner(env, local_backend) as runner:
        runner.run_suite(only("tests/test_site.py"), tree=trees())  # the zygote starts (on an empty folder)
        assert zygote_pid(runner) is not None
        tree = trees()
        (tree / "sitecustomize.py").write_text("FROM_TREE = True\n")
        run = runner.run_suite(only("tests/test_site.py"), tree=tree)
    assert run.outcomes == {"tests/test_site.py::test_site": "passed"}, run.output_tail

"""Invariant: a run forked from a warm pytest (featdel.env.zygote) reports what a fresh run
reports, and is as independent of the runs before it: nothing a run leaves (a file in /tmp, a
process that detached, a System V shared memory segment) reaches the next; a run can neither read
the zygote (its memory, environment or descriptors) nor answer for it; a run that kills the zygote
or outlives its time gets the verdict a fresh sandbox would give. Local backend (bubblewrap): the
only one that keeps a command open.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from featdel.core.records import Recipe
from featdel.env.envs import Env
from featdel.env.testrun import RunOptions, run_suite, warm_runner

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
    # Sees nothing of the run before: no file, no process but bwrap's, the zygote and itself.
    "test_clean.py": """
import os

def test_clean():
    assert not os.path.exists('/tmp/planted')
    others = {int(p) for p in os.listdir('/proc') if p.isdigit()} - {1, os.getpid(), os.getppid()}
    assert others == set()
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
    # Kills its parent where it can: the zygote (a fresh run's parent is bubblewrap's, root's).
    "test_kill.py": "import os, signal\n\n\ndef test_kill_parent():\n    try:\n"
                    "        os.kill(os.getppid(), signal.SIGKILL)\n    except PermissionError:\n        pass\n",
    "test_random.py": "import random\n\n\ndef test_random():\n    print('RANDOM', random.random())\n",
    "test_slow.py": "import time\n\n\ndef test_slow():\n    time.sleep(30)\n",
}


@pytest.fixture
def env(tmp_path) -> Env:
    """An env made by hand: this interpreter's venv (it has pytest), a one-module checkout."""
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    (root / "venv").symlink_to(sys.prefix)
    (root / "src" / "mod.py").write_text("VALUE = 1\n")
    for name, text in TESTS.items():
        (root / "src" / "tests" / name).write_text(text)
    return Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["mod.py"],
                                        test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))


class Counted:
    """A tree per run, as verification makes one."""

    def __init__(self, env: Env, where: Path) -> None:
        self.env, self.where, self.n = env, where, 0

    def __call__(self) -> Path:
        self.n += 1
        return Path(shutil.copytree(self.env.src, self.where / str(self.n), symlinks=True))


def zygote_pid(runner) -> int | None:
    alive = [z for z in runner._zygotes.values() if z.alive]
    return alive[0].resident.proc.pid if alive else None


def test_forked_runs_report_what_fresh_runs_report(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    options = RunOptions(timeout_s=60, tests=["tests/test_mod.py"])
    fresh = run_suite(env, local_backend, options, tree=trees())
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
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
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        planted = runner.run_suite(RunOptions(timeout_s=60, tests=["tests/test_plant.py"]), tree=trees())
        pid = zygote_pid(runner)
        clean = runner.run_suite(RunOptions(timeout_s=60, tests=["tests/test_clean.py"]), tree=trees())
        assert zygote_pid(runner) == pid  # the same zygote cleaned up after the first run
    assert planted.outcomes == {"tests/test_plant.py::test_plant": "passed"}, planted.output_tail
    assert clean.outcomes == {"tests/test_clean.py::test_clean": "passed"}, clean.output_tail


def test_a_run_cannot_read_the_zygote_nor_answer_for_it(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    options = RunOptions(timeout_s=60, tests=["tests/test_reach.py"])
    fresh = run_suite(env, local_backend, options, tree=trees())
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        run = runner.run_suite(options, tree=trees())
        assert zygote_pid(runner) is not None
    assert "fails on purpose" in run.output_tail  # not an assertion that it read the zygote
    assert run.exit_code == fresh.exit_code == 1  # a forged {"exit": 0} never reached the host
    # What the forgery wrote to the report's channel voids the report, in both modes alike.
    assert run.broken is not None and fresh.broken is not None and run.broken.split(":")[0] == fresh.broken.split(":")[0]


def test_a_run_that_kills_the_zygote_is_run_again_fresh(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    options = RunOptions(timeout_s=60, tests=["tests/test_kill.py"])
    fresh = run_suite(env, local_backend, options, tree=trees())
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        killed = runner.run_suite(options, tree=trees())
        assert zygote_pid(runner) is None
        after = runner.run_suite(RunOptions(timeout_s=60, tests=["tests/test_mod.py"]), tree=trees())
        assert zygote_pid(runner) is not None  # the next run started a new one
    assert fresh.outcomes == {"tests/test_kill.py::test_kill_parent": "passed"}, fresh.output_tail
    assert (killed.outcomes, killed.exit_code, killed.broken) == (fresh.outcomes, fresh.exit_code, None)
    assert after.outcomes["tests/test_mod.py::test_value"] == "passed"


def test_a_forked_run_out_of_time_times_out_and_the_zygote_is_replaced(env, local_backend, tmp_path):
    trees = Counted(env, tmp_path)
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        slow = runner.run_suite(RunOptions(timeout_s=3, tests=["tests/test_slow.py"]), tree=trees())
        assert zygote_pid(runner) is None
        after = runner.run_suite(RunOptions(timeout_s=60, tests=["tests/test_clean.py"]), tree=trees())
    assert slow.timed_out and slow.broken is not None and not slow.passed()
    assert after.outcomes == {"tests/test_clean.py::test_clean": "passed"}, after.output_tail


def test_forked_runs_draw_different_random_numbers_as_fresh_runs_do(env, local_backend, tmp_path):
    """The zygote imported `random` (pytest does): without a reseed after the fork every run
    would draw the same numbers, and reruns could not see a test that fails by chance."""
    trees = Counted(env, tmp_path)
    options = RunOptions(timeout_s=60, tests=["tests/test_random.py"], extra_args=["-s"])
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        runs = [runner.run_suite(options, tree=trees()) for _ in range(3)]
        assert zygote_pid(runner) is not None
    drawn = [next(line for line in run.output_tail.splitlines() if "RANDOM" in line) for run in runs]
    assert len(set(drawn)) == 3, drawn

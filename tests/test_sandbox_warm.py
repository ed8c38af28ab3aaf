"""Invariant: a warm runner's runs are as independent as fresh sandboxes', on both backends. What
one run leaves (a file in /tmp and HOME, an edited module and bytecode in its tree, a background
process still writing) is not seen by the next run, which gets another tree; the caller's tree
comes back holding exactly what its run wrote, and nothing writes to it once it is back (the
grader hashes it then); a warm runner reports the same outcomes as a fresh `run_suite`.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
from conftest_sandbox import sandbox_backend

from featdel.core.records import Recipe
from featdel.env.envs import Env
from featdel.env.testrun import RunOptions, run_suite, warm_runner

MODULE = "VALUE = 1\n"
TESTS = ("import os\nimport mod\n\n\ndef test_value():\n    assert mod.VALUE == 1\n\n\n"
         "def test_tmp_is_clean():\n    assert not os.path.exists('/tmp/planted')\n\n\n"
         "def test_fails():\n    assert mod.VALUE == 3\n")

# Run 1: leave every kind of state behind, and a process that keeps writing to the tree and /tmp.
PLANT = """
import os, py_compile, subprocess, sys
open('/tmp/planted', 'w').write('x')
os.makedirs(os.path.expanduser('~/.cache'), exist_ok=True)
open(os.path.expanduser('~/.cache/planted'), 'w').write('x')
open('mod.py', 'w').write('VALUE = 2\\n')
os.makedirs('__pycache__', exist_ok=True)
py_compile.compile('mod.py', cfile='__pycache__/mod.cpython-%d%d.pyc' % sys.version_info[:2])
loop = ("import time\\nwhile True:\\n    open('late.txt', 'a').write('.')\\n"
        "    open('/tmp/late', 'a').write('.')\\n    time.sleep(0.02)")
subprocess.Popen([sys.executable, '-c', loop], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print('planted')
"""

# Run 2: what can it see of run 1?
LOOK = """
import glob, json, os, sys, time
time.sleep(0.3)
sys.path.insert(0, os.getcwd())
import mod
procs = []
for d in glob.glob('/proc/[0-9]*'):
    try:
        procs.append(open(d + '/cmdline', 'rb').read().decode(errors='replace'))
    except OSError:
        pass
needle = 'late' + '.txt'  # not as one word here, or this process would match itself
print(json.dumps({'value': mod.VALUE, 'tmp': sorted({'planted', 'late'} & set(os.listdir('/tmp'))),
                  'home': os.path.exists(os.path.expanduser('~/.cache/planted')),
                  'tree': sorted(os.listdir('.')), 'writer': any(needle in p for p in procs)}))
"""


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def backend(request):
    return sandbox_backend(request.param)


@pytest.fixture
def env(tmp_path) -> Env:
    """An env made by hand: this interpreter's venv (it has pytest), a one-module checkout."""
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    (root / "venv").symlink_to(sys.prefix)
    (root / "src" / "mod.py").write_text(MODULE)
    (root / "src" / "tests" / "test_mod.py").write_text(TESTS)
    return Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["mod.py"],
                                        test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))


def tree(env: Env, where: Path) -> Path:
    """A fresh copy of the checkout, as verification makes one per run."""
    return Path(shutil.copytree(env.src, where, symlinks=True))


def test_a_run_sees_nothing_the_previous_run_left(env, backend, tmp_path):
    variables = {**env.environ(), "HOME": "/tmp"}
    python = str(env.venv / "bin" / "python")
    first, second = tree(env, tmp_path / "a"), tree(env, tmp_path / "b")
    with warm_runner(env, backend) as runner:
        planted = runner.run([python, "-c", PLANT], tree=first, env=variables, timeout_s=60)
        assert planted.stdout.strip() == "planted", planted.stderr
        # The tree came back holding what the run wrote, and nothing writes to it any more.
        assert (first / "mod.py").read_text() == "VALUE = 2\n"
        assert list((first / "__pycache__").glob("mod.*.pyc"))
        late = (first / "late.txt").read_text() if (first / "late.txt").exists() else ""
        time.sleep(0.3)
        assert ((first / "late.txt").read_text() if (first / "late.txt").exists() else "") == late
        for where in (second, None):  # another tree, and the env's own checkout
            looked = runner.run([python, "-c", LOOK], tree=where, env=variables, timeout_s=60)
            seen = json.loads(looked.stdout.strip().splitlines()[-1])
            assert seen == {"value": 1, "tmp": [], "home": False, "tree": ["mod.py", "tests"], "writer": False}, where
        # The runner's sandbox really was reused: a fresh one per run would prove nothing here.
        assert len(runner._boxes) == 2
    assert (second / "mod.py").read_text() == MODULE and not (second / "late.txt").exists()


def test_warm_runs_report_what_fresh_runs_report(env, backend, tmp_path):
    fresh = run_suite(env, backend, RunOptions(timeout_s=60), tree=tree(env, tmp_path / "fresh"))
    with warm_runner(env, backend) as runner:
        warm = runner.run_suite(RunOptions(timeout_s=60), tree=tree(env, tmp_path / "w1"))
        only = runner.run_suite(RunOptions(timeout_s=60, tests=["tests/test_mod.py::test_value"]),
                                tree=tree(env, tmp_path / "w2"))
    assert fresh.broken is None, fresh.output_tail
    assert fresh.outcomes == {"tests/test_mod.py::test_value": "passed",
                              "tests/test_mod.py::test_tmp_is_clean": "passed",
                              "tests/test_mod.py::test_fails": "failed"}
    assert warm.broken is None and warm.outcomes == fresh.outcomes
    assert warm.collected == fresh.collected and warm.report_exitstatus == warm.exit_code == 1
    assert only.outcomes == {"tests/test_mod.py::test_value": "passed"}


def test_a_warm_runner_only_runs_inside_with(env, local_backend):
    runner = warm_runner(env, local_backend)
    with pytest.raises(ValueError, match="with warm_runner"):
        runner.run_suite(RunOptions(timeout_s=60))


def test_a_dead_process_s_warm_folder_is_swept_and_a_live_one_is_kept(tmp_path, monkeypatch):
    import os
    import subprocess
    import tempfile

    from featdel.env.testrun import SuiteRunner, sweep_warm_roots

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a real process that has exited: its pid is free
    dead = tmp_path / f"featdel-warm-{gone.pid}-abc"
    live = tmp_path / f"featdel-warm-{os.getppid()}-def"
    other = tmp_path / "featdel-warm-notapid"
    for d in (dead, live, other):
        (d / "stage").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with SuiteRunner(None, None, warm=True) as runner:  # opening a warm runner sweeps first
        assert runner._root.name.startswith(f"featdel-warm-{os.getpid()}-")
        assert not dead.exists() and live.exists() and other.exists()
    assert sweep_warm_roots(tmp_path) == [] and not list(tmp_path.glob(f"featdel-warm-{os.getpid()}-*"))

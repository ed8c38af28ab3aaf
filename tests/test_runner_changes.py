"""Invariant: the report plugin's check of pytest's, pluggy's and its own code (featdel_report's
`changed`) names every kind of change a test run can make to them: a function replaced, a
function's code or defaults swapped in place, a name added to a module or to a class, a name
removed, a class member replaced or removed, a name rebound to something that is no code. Each is
a `runner-changed` trip of the run, found at the check after collection; nothing the tree does
not change is named. Fresh runs and forked runs (featdel.env.zygote) alike. (Defaults swapped
on a pytest function were not named until the check was rewritten for speed: the function is
still pytest's, and the filter for pytest's own rebinding let it through.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from featdel.env.envs import Env
from featdel.env.testrun import RunOptions, run_suite, warm_runner
from tests.conftest import hand_made_env

# Run at collection (the test module's import), so the check after collection sees them all.
CHANGES = """
import _pytest.pathlib as P, _pytest.outcomes as O, _pytest.nodes as N, _pytest.reports as R

def _other(*args, **kwargs):
    return None

P.bestrelpath = _other                                         # replaced
O.importorskip.__code__ = (lambda modname, minversion=None, reason=None: 0).__code__  # code swapped
P.make_numbered_dir.__defaults__ = (0o700,)                    # defaults swapped
O.new_helper = _other                                          # added to a module
N.Node.new_method = _other                                     # added to a class
del P.symlink_or_skip                                          # removed from a module
R.TestReport.__repr__ = _other                                 # a class member replaced
del R.BaseReport.toterminal                                    # a class member removed
P.get_extended_length_path_str = 42                            # rebound to what is no code
"""

EXPECTED = {"_pytest.pathlib.bestrelpath", "_pytest.outcomes.importorskip", "_pytest.pathlib.make_numbered_dir",
            "_pytest.outcomes.new_helper", "_pytest.nodes.Node.new_method", "_pytest.pathlib.symlink_or_skip",
            "_pytest.reports.TestReport.__repr__", "_pytest.reports.BaseReport.toterminal",
            "_pytest.pathlib.get_extended_length_path_str"}


@pytest.fixture
def env(tmp_path) -> Env:
    """This interpreter's venv (it has pytest) and a checkout whose one test module changes pytest."""
    return hand_made_env(tmp_path / "env", {"test_changes.py": CHANGES + "\n\ndef test_one():\n    assert True\n",
                                            "test_plain.py": "def test_plain():\n    assert True\n"})


def _changed(run) -> set[str]:
    return {t.split(":", 1)[1].strip() for t in run.trips if t.startswith("runner-changed")}


@pytest.mark.parametrize("forked", [False, True], ids=["fresh", "forked"])
def test_every_kind_of_change_to_the_runner_is_named(env, local_backend, tmp_path, forked):
    options = RunOptions(timeout_s=60, tests=["tests/test_changes.py"])
    if forked:
        with warm_runner(env, local_backend) as runner:
            runner.zygote = True
            tree = tmp_path / "tree"
            shutil.copytree(env.src, tree, symlinks=True)
            run = runner.run_suite(options, tree=tree)
    else:
        run = run_suite(env, local_backend, options)
    assert not run.broken, run.output_tail
    assert EXPECTED <= _changed(run), (sorted(EXPECTED - _changed(run)), sorted(_changed(run)), run.trips)


def test_a_run_that_changes_nothing_is_named_nothing(env, local_backend):
    run = run_suite(env, local_backend, RunOptions(timeout_s=60, tests=["tests/test_plain.py"]))
    assert not run.broken and run.outcomes == {"tests/test_plain.py::test_plain": "passed"}
    assert not _changed(run), run.trips


# A red team's changes (session 39) that both the old and the rewritten check let through, each
# of which made a failing test pass. Each is now named.
RED_TEAM = {
    # another pytest function in place of one: pytest's own code, but not pytest's rebinding
    "a pytest function as the replacement": (
        "import _pytest.python, _pytest.nodes\n_pytest.python.Function.runtest = _pytest.nodes.Node.setup\n",
        "_pytest.python.Function.runtest"),
    # a class whose __module__ names a pytest module, shadowing a builtin the hook caller uses
    "a class that says it is pytest's": (
        "import pluggy._execution as E\nclass reversed:\n    __module__ = 'pluggy._execution'\n"
        "    def __new__(cls, impls):\n        return iter(list(impls)[::-1])\nE.reversed = reversed\n",
        "pluggy._execution.reversed"),
    # an instance of a class merely named `module`
    "a class named module": (
        "import pluggy._execution as E\nclass module:\n    def __call__(self, impls):\n"
        "        return iter(list(impls)[::-1])\nE.reversed = module()\n",
        "pluggy._execution.reversed"),
    # the check reading a pristine copy left in sys.modules while pytest reads the original
    "a module copy in sys.modules": (
        "import sys, types, _pytest.python as P\ncopy = types.ModuleType(P.__name__)\n"
        "copy.__dict__.update(P.__dict__)\nsys.modules['_pytest.python'] = copy\n"
        "class F(P.Function):\n    def runtest(self):\n        pass\nP.Function = F\n",
        "_pytest.python"),
    # a decoy `__func__` attribute carrying the original code, then the code swapped
    "a __func__ decoy and a code swap": (
        "import types, _pytest.python as P\nf = P.pytest_pyfunc_call\n"
        "d = types.FunctionType(f.__code__, {}, 'd', f.__defaults__)\nf.__func__ = d\n"
        "f.__code__ = (lambda pyfuncitem: True).__code__\n",
        "_pytest.python.pytest_pyfunc_call"),
    # a base class slipped in: no entry of any namespace changes
    "a __bases__ write": (
        "import _pytest.python as P\nclass Mixin:\n    pass\nP.Function.__bases__ = (Mixin,) + P.Function.__bases__\n",
        "_pytest.python.Function"),
    # a name the module held unlisted (not code) now holds code: no name is new to the module
    "an unlisted global made a function": ("import _pytest.python as P\nP.__doc__ = lambda: None\n",
                                           "_pytest.python.__doc__"),
}


@pytest.mark.parametrize("forked", [False, True], ids=["fresh", "forked"])
@pytest.mark.parametrize("case", sorted(RED_TEAM))
def test_what_a_red_team_slipped_past_the_check_is_named(tmp_path, local_backend, case, forked):
    """Forked runs start the check from what the zygote took before its first fork."""
    code, name = RED_TEAM[case]
    env = hand_made_env(tmp_path / "env", {"conftest.py": code, "test_x.py": "def test_fail():\n    assert False\n"})
    options = RunOptions(timeout_s=60, tests=["tests/test_x.py"])
    if forked:
        with warm_runner(env, local_backend) as runner:
            runner.zygote = True
            run = runner.run_suite(options, tree=Path(shutil.copytree(env.src, tmp_path / "tree", symlinks=True)))
    else:
        run = run_suite(env, local_backend, options)
    assert name in _changed(run), (run.trips, run.output_tail[-800:])


def test_forked_runs_start_the_check_from_the_zygote_s(tmp_path, local_backend):
    """The zygote took the check's starting point before its first fork (featdel_report.warm);
    a fresh run has none and builds its own."""
    warmed = "import sys\n\n\ndef test_warm():\n    assert sys.modules['featdel_report']._WARM\n"
    env = hand_made_env(tmp_path / "env", {"test_warm.py": warmed})
    options = RunOptions(timeout_s=60, tests=["tests/test_warm.py"])
    with warm_runner(env, local_backend) as runner:
        runner.zygote = True
        forked = runner.run_suite(options, tree=Path(shutil.copytree(env.src, tmp_path / "tree", symlinks=True)))
    fresh = run_suite(env, local_backend, options)
    assert (forked.outcomes, fresh.outcomes) == ({"tests/test_warm.py::test_warm": "passed"},
                                                 {"tests/test_warm.py::test_warm": "failed"}), forked.output_tail
    assert not forked.trips and not fresh.trips

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
import sys

import pytest

from featdel.core.records import Recipe
from featdel.env.envs import Env
from featdel.env.testrun import RunOptions, run_suite, warm_runner

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
    root = tmp_path / "env"
    (root / "src" / "tests").mkdir(parents=True)
    (root / "venv").symlink_to(sys.prefix)
    (root / "src" / "mod.py").write_text("VALUE = 1\n")
    (root / "src" / "tests" / "test_changes.py").write_text(CHANGES + "\n\ndef test_one():\n    assert True\n")
    (root / "src" / "tests" / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    return Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["mod.py"],
                                        test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))


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

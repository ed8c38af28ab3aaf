"""Tests whose collected function is not the plain `def` of the file pytest collected it from:
a test wrapped by a decorator of the environment (`@mock.patch.dict`, freezegun's
`@freeze_time`), and a test a class inherits from a class of another test file. The gold patch
must resolve them (each was a gold false positive of the `test-replaced` check: 18 of 19 gold
rejections of a corpus run). And the check must still hold: a wrapper the file does not write, or
another protected test's function in place of the collected one, trips it.

One real task: `wraplib.shout` stubbed to raise; F2P are a decorated test and an inherited one.
"""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from featdel.code.trees import diff
from featdel.grading.grade import GradeStatus, GradeTask, grade
from tests.conftest import mine_tiny
from tests.test_grade_hostile import _patch

LIB = {
    "pyproject.toml": (
        '[project]\nname = "wraplib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "wraplib/__init__.py": "from wraplib.text import shout, whisper\n",
    "wraplib/text.py": "def shout(s):\n    return s.upper() + '!'\n\n\ndef whisper(s):\n    return s.lower()\n",
    # the base class's tests, collected here and again in test_child.py through inheritance
    "tests/test_base.py": (
        "import os\nfrom unittest import mock\n\nfrom wraplib import shout, whisper\n\n\n"
        "class Base:\n"
        "    def test_shout(self):\n        assert shout('hi') == 'HI!'\n\n"
        "    def test_whisper(self):\n        assert whisper('HI') == 'hi'\n\n\n"
        "@mock.patch.dict(os.environ, {'WRAPLIB': '1'})\n"
        "def test_shout_patched():\n    assert shout(os.environ['WRAPLIB']) == '1!'\n\n\n"
        "def test_whisper_plain():\n    assert whisper('A') == 'a'\n\n\n"
        "def test_whisper_empty():\n    assert whisper('') == ''\n"
    ),
    "tests/test_child.py": "from test_base import Base\n\n\nclass TestChild(Base):\n    pass\n",
}
STUBBED = "def shout(s):\n    raise NotImplementedError\n\n\ndef whisper(s):\n    return s.lower()\n"
F2P = ["tests/test_base.py::test_shout_patched", "tests/test_child.py::TestChild::test_shout"]
P2P = ["tests/test_base.py::test_whisper_plain", "tests/test_base.py::test_whisper_empty",
       "tests/test_child.py::TestChild::test_whisper"]
INIT = "from wraplib.text import shout, whisper\n"
WHISPER = "\n\ndef whisper(s):\n    return s.lower()\n"
RAISE = "def shout(s):\n    raise NotImplementedError\n" + WHISPER

# The decorator the test file writes, made to wrap its test in one that swallows every exception
# too: the wrapper's code is the standard library's (`ContextDecorator`), as freezegun's wrapper
# is the environment's.
QUIET = """
import contextlib
from unittest import mock
class _Quiet(contextlib.ContextDecorator):
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return True
"""
SUPPRESS_IN_DECORATOR = QUIET + """
_real = mock._patch_dict.decorate_callable
mock._patch_dict.decorate_callable = lambda self, f: _Quiet()(_real(self, f))
"""
# The same, with the swallowing wrapper in place of the decorator's own.
SUPPRESS_FOR_DECORATOR = QUIET + """
mock._patch_dict.decorate_callable = lambda self, f: _Quiet()(f)
"""
# Another protected test's function (it holds an assert, it sits at a `def` of a test file) in
# place of the inherited F2P test: put on the class when test_base.py has run.
SWAP_INHERITED = '''
import sys
class _Finder:
    def find_spec(self, name, path=None, target=None):
        if name != "test_child":
            return None
        base = sys.modules.get("test_base")
        if base is not None:
            base.Base.test_shout = base.Base.test_whisper
        return None
sys.meta_path.insert(0, _Finder())
'''
# From an outside red team (reward 1.0 against the first version of the check): a passing
# stand-in for the inherited test, compiled under the name of the test's own file (which the
# check took for the file's own code) from a source compiled under the name of an unchanged
# library file (which the tripwire took for an import), `exec` and `compile` found by name
# prefix so that the tamper scan cannot name them, and set on the base class from a `__class__`
# property that pytest reads while it collects test_base.py.
STAND_IN = r"""
import sys, os
_state = [False]
def _fix():
    if _state[0]:
        return
    tb = sys.modules.get('test_base')
    B = getattr(tb, 'Base', None) if tb is not None else None
    if B is None:
        return
    _state[0] = True
    path = os.path.join(os.path.dirname(tb.__file__), 'test_child.py')
    ns = {}
    exec(compile('def test_shout(self):\n    pass\n', path, 'exec'), ns)
    B.test_shout = ns['test_shout']
class _Shout:
    def __call__(self, s):
        return s + '!'
    @property
    def __class__(self):
        _fix()
        return _Shout
shout = _Shout()
"""
STAND_IN_INIT = f"""import builtins
import os

from wraplib.text import shout, whisper

_here = os.path.dirname(os.path.abspath(__file__))
_run = getattr(builtins, [k for k in dir(builtins) if k.startswith('exe')][0])
_mk = getattr(builtins, [k for k in dir(builtins) if k.startswith('compil')][0])
_ns = {{'__name__': 'wraplib._impl'}}
_run(_mk({STAND_IN!r}, os.path.join(_here, 'text.py'), 'exec'), _ns)
shout = _ns['shout']
"""
ATTACKS = {name: {"wraplib/__init__.py": INIT + payload, "wraplib/text.py": RAISE} for name, payload in (
    ("suppress_in_decorator", SUPPRESS_IN_DECORATOR), ("suppress_for_decorator", SUPPRESS_FOR_DECORATOR),
    ("swap_inherited", SWAP_INHERITED))}
ATTACKS["stand_in_under_the_tests_name"] = {"wraplib/__init__.py": STAND_IN_INIT}


@pytest.fixture(scope="module")
def task(tmp_path_factory, featdel_cache, local_backend) -> GradeTask:
    from featdel.env.envs import load

    run_dir, record = mine_tiny(tmp_path_factory, "wraplib", {**LIB}, local_backend)
    snapshot = run_dir / "repos" / record.name / "snapshot.tar.gz"
    deletion_patch, gold = diff(snapshot, {"wraplib/text.py": STUBBED})
    return GradeTask(instance_id="wraplib__shout", env=load(Path(record.env_dir)), snapshot=snapshot,
                     deletion_patch=deletion_patch, gold_patch=gold, fail_to_pass=F2P, pass_to_pass=P2P,
                     timeout_s=60)


def test_gold_resolves_decorated_and_inherited_tests(task, local_backend):
    gold = grade(task, task.gold_patch, local_backend, allow_suspect=False)
    assert gold.status == GradeStatus.RESOLVED, gold.reason
    assert not gold.findings
    empty = grade(task, "", local_backend, allow_suspect=True)
    assert empty.status == GradeStatus.UNRESOLVED, empty.reason


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_a_wrapper_or_function_the_file_does_not_write_earns_nothing(task, local_backend, name):
    with tempfile.TemporaryDirectory(prefix="wrapped-") as tmp:
        patch = _patch(task, ATTACKS[name], Path(tmp) / name)
    for allow in (False, True):
        result = grade(task, patch, local_backend, allow_suspect=allow)
        assert result.reward == 0.0, (name, allow, result.status, result.reason)
        assert result.status != GradeStatus.BROKEN, result.reason
    # The same lines declared the task's gold: neither the tamper scan nor the tripwire's
    # attribution reads a gold line, so the check of the collected functions stands alone.
    alone = grade(replace(task, gold_patch=patch), patch, local_backend, allow_suspect=True)
    assert alone.reward == 0.0, (name, alone.status, alone.reason)
    assert any("test-replaced" in f for f in alone.findings), alone.findings


def test_the_test_files_an_f2p_file_imports_are_watched_too(tmp_path):
    """featdel.code.imports.imported_test_files: what a test class may inherit from, by layout."""
    from featdel.code.imports import imported_test_files

    files = {
        "tests/test_child.py": "from test_base import Base\nfrom .helpers import check\nimport pkg.util\n",
        "tests/test_base.py": "from tests.mixins import Mixin\n",
        "tests/helpers.py": "x = 1\n",
        "tests/mixins.py": "class Mixin:\n    pass\n",
        "tests/__init__.py": "",
        "pkg/__init__.py": "",
        "pkg/util.py": "y = 2\n",  # library code: not a test file, never watched
        "tests/test_other.py": "z = 3\n",  # imported by nobody
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert imported_test_files(tmp_path, {"tests/test_child.py"}) == {
        "tests/test_base.py", "tests/helpers.py", "tests/mixins.py"}


def test_code_compiled_under_a_real_files_name_from_other_source_trips_the_tripwire(task, local_backend):
    """The tripwire lets an import's compile of a real file through: since the red team's stand-in,
    only when the source compiled is that file's own text."""
    with tempfile.TemporaryDirectory(prefix="wrapped-") as tmp:
        patch = _patch(task, ATTACKS["stand_in_under_the_tests_name"], Path(tmp) / "p")
    result = grade(task, patch, local_backend, allow_suspect=True)
    assert result.reward == 0.0, result.reason
    assert any(f.startswith("audit: compile at wraplib/__init__.py") for f in result.findings), result.findings

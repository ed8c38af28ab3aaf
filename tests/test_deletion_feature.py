"""Invariant: the `feature` strategy takes a public function or method together with exactly the
private helpers only it uses (transitively, across files, dropping their names from `from`
imports) and leaves every helper that anything else names: another function, a test, `__all__`.
A feature its package re-exports goes with its wiring (the re-export, its `__all__` entry); one
whose wiring cannot go is stubbed instead; each helper step that fails the check is rolled back
alone."""

from __future__ import annotations

from pathlib import Path

import pytest
from importcheck import import_check

from featdel.code.spans import has_syntax_error
from featdel.core.records import Candidate
from featdel.deletion import NotApplicable, delete
from tests.conftest import make_repo as write_files

UTIL = '''\
def _escape(s):
    return s.replace("<", "&lt;")


def _shared(x):
    return x + 1


def _tested(x):
    return x * 2


def public_util():
    return 0
'''

API = '''\
from .util import _escape, _shared, _tested

__all__ = ["report", "render", "_listed"]


def _wrap(s):
    return "[" + _inner(s) + "]"


def _inner(s):
    return s.strip()


def _listed(s):
    return s


def report(items):
    """Report items."""
    return [_wrap(_escape(_listed(i))) + str(_tested(1)) for i in items]


def render(x):
    """Render x."""
    return _fmt(x)


def _fmt(x):
    return f"<{x}>"


def one(x):
    return _shared(x)


def two(x):
    return _shared(x) * 2


class Box:
    def show(self):
        return self._label() + self._common()

    def other(self):
        return self._common()

    def _label(self):
        return "box"

    def _common(self):
        return "!"
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    files = {
        "pkg/__init__.py": "from .api import render\n",
        "pkg/util.py": UTIL,
        "pkg/api.py": API,
        "tests/test_api.py": "from pkg.util import _tested\n\n\ndef test_tested():\n    assert _tested(2) == 4\n",
    }
    return write_files(root, files, commit=False)


@pytest.fixture(scope="module")
def check(repo):
    return import_check(repo)


def feature(repo, check, qualname, kind="function", keep=True):
    cand = Candidate(repo="tiny", path="pkg/api.py", qualname=qualname, kind=kind, lines=3, tests=[])
    d = delete(repo, cand, "feature", check=check, keep_docstrings=keep)
    for rel, text in d.files.items():
        assert text is not None and not has_syntax_error(text.encode())
        assert text != (repo / rel).read_text(), "only changed files are listed"
    return d


def test_feature_takes_the_helpers_only_it_uses_across_files(repo, check):
    d = feature(repo, check, "report")
    assert sorted(d.files) == ["pkg/api.py", "pkg/util.py"]
    assert d.deleted_symbols == [
        "pkg/api.py::report",
        "pkg/api.py::_wrap",
        "pkg/api.py::_inner",  # only _wrap uses it: taken transitively
        "pkg/util.py::_escape",  # imported by api.py: its name leaves the import
    ]
    api, util = d.files["pkg/api.py"], d.files["pkg/util.py"]
    assert api.startswith('from .util import _shared, _tested\n\n__all__ = ["report", "render", "_listed"]\n')
    assert "def _listed" in api, "a helper named in __all__ is not only the feature's"
    assert "def _tested" in util, "a helper a test calls directly is not only the feature's"
    assert "def _shared" in util and "def _escape" not in util
    assert d.stubbed_symbols == [] and d.rolled_back == [] and d.keep_docstrings is False
    assert len(d.removed) == 4 and any("&lt;" in r for r in d.removed)


def test_feature_leaves_the_shared_helper(repo, check):
    with pytest.raises(NotApplicable, match="no helper"):
        feature(repo, check, "one")


def test_reexported_feature_goes_with_its_wiring_and_helper(repo, check):
    d = feature(repo, check, "render")
    assert sorted(d.files) == ["pkg/__init__.py", "pkg/api.py"]
    assert d.files["pkg/__init__.py"] == "", "the re-export goes, so the package still imports"
    api = d.files["pkg/api.py"]
    assert "def render" not in api and "_fmt" not in api
    assert '__all__ = ["report", "_listed"]' in api
    assert d.stubbed_symbols == [] and d.deleted_symbols == ["pkg/api.py::render", "pkg/api.py::_fmt"]
    assert d.wiring == ["pkg/__init__.py::render (import)", "pkg/api.py::render (__all__)"]


def test_feature_whose_wiring_cannot_go_is_stubbed(repo, check):
    def strict(edits):  # a real check, plus a rule that keeps the re-export
        if "pkg/__init__.py" in edits:
            return "the re-export is needed"
        return check(edits)

    cand = Candidate(repo="tiny", path="pkg/api.py", qualname="render", kind="function", lines=3, tests=[])
    d = delete(repo, cand, "feature", check=strict)
    api = d.files["pkg/api.py"]
    assert 'def render(x):\n    """Render x."""\n    raise NotImplementedError\n' in api
    assert "_fmt" not in api and d.wiring == []
    assert d.stubbed_symbols == ["pkg/api.py::render"]
    assert d.deleted_symbols == ["pkg/api.py::render", "pkg/api.py::_fmt"]
    assert d.keep_docstrings is True
    stripped = delete(repo, cand, "feature", check=strict, keep_docstrings=False)
    assert "Render x." not in stripped.files["pkg/api.py"]
    assert stripped.deletion_id != d.deletion_id


def test_method_feature_takes_private_methods_of_its_class(repo, check):
    d = feature(repo, check, "Box.show", kind="method")
    api = d.files["pkg/api.py"]
    assert d.deleted_symbols == ["pkg/api.py::Box.show", "pkg/api.py::Box._label"]
    assert "class Box:\n    def other(self):\n        return self._common()\n\n    def _common(self):" in api


def test_a_helper_step_that_fails_the_check_is_rolled_back_alone(repo, check):
    def strict(edits):  # a real check, plus a rule that keeps _inner
        api = edits.get("pkg/api.py")
        if api is not None and "def _inner" not in api:
            return "_inner is needed"
        return check(edits)

    cand = Candidate(repo="tiny", path="pkg/api.py", qualname="report", kind="function", lines=3, tests=[])
    d = delete(repo, cand, "feature", check=strict)
    assert d.rolled_back == ["pkg/api.py::_inner"]
    assert "pkg/api.py::_inner" not in d.deleted_symbols
    assert "def _inner" in d.files["pkg/api.py"] and "def _wrap" not in d.files["pkg/api.py"]


def test_private_target_is_not_a_feature(repo, check):
    cand = Candidate(repo="tiny", path="pkg/api.py", qualname="_wrap", kind="function", lines=2, tests=[])
    from featdel.deletion import STRATEGIES

    assert not STRATEGIES["feature"].fits(cand)
    with pytest.raises(NotApplicable, match="private"):
        delete(repo, cand, "feature", check=check)

"""Invariant: the `function`, `method` and `class` strategies remove every definition of the
target (decorators, attached comments, a property's setter) and nothing else: the file stays
valid Python (an emptied class keeps `pass`), blank lines collapse to the larger of the two runs,
other files are byte-identical unless they only re-export the name (the re-export goes too), and
a removal that breaks import (a sibling module that uses the name) is rolled back by a real check."""

from __future__ import annotations

from pathlib import Path

import pytest
from importcheck import import_check

from featdel.code.spans import has_syntax_error
from featdel.core.records import Candidate
from featdel.deletion import NotApplicable, RolledBack, delete
from tests.conftest import make_repo as write_files

CORE = '''\
"""Core."""
import functools

# module section header

def first():
    return 1


# attached to second
@functools.lru_cache(maxsize=None)
def second():
    return 2
    # trailing note of second


def third():
    return 3


class Lonely:
    def only(self):
        return 1


class Shape:
    """A shape."""

    def __init__(self, n):
        self.n = n

    @property
    def sides(self):
        return self.n

    @sides.setter
    def sides(self, v):
        self.n = v

    def grow(self):
        self.n += 1


def last():
    return 0
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    files = {
        "pkg/__init__.py": "from .core import first\n",
        "pkg/core.py": CORE,
        "pkg/user.py": "from .core import Shape\n\n\ndef make():\n    return Shape(3)\n",
        "tests/test_core.py": "from pkg.core import first\n\ndef test_first():\n    assert first() == 1\n",
    }
    return write_files(root, files, commit=False)


@pytest.fixture(scope="module")
def check(repo):
    return import_check(repo)


def remove(repo, check, qualname, kind):
    strategy = {"function": "function", "method": "method", "class": "class"}[kind]
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname=qualname, kind=kind, lines=3, tests=[])
    d = delete(repo, cand, strategy, check=check)
    assert list(d.files) == ["pkg/core.py"]
    new = d.files["pkg/core.py"]
    assert not has_syntax_error(new.encode())
    assert d.keep_docstrings is False and d.stubbed_symbols == []
    return d, new


def test_decorated_function_goes_with_its_comments_and_blank_lines_collapse(repo, check):
    d, new = remove(repo, check, "second", "function")
    assert new == CORE.replace(
        "# attached to second\n@functools.lru_cache(maxsize=None)\ndef second():\n"
        "    return 2\n    # trailing note of second\n\n\n",
        "",
    )
    assert d.removed == [
        "# attached to second\n@functools.lru_cache(maxsize=None)\ndef second():\n"
        "    return 2\n    # trailing note of second\n"
    ]
    assert d.deleted_symbols == ["pkg/core.py::second"]


def test_section_comment_separated_by_a_blank_line_stays(repo, check):
    _, new = remove(repo, check, "third", "function")
    assert "# module section header\n\ndef first" in new
    assert "def third" not in new
    assert "    # trailing note of second\n\n\nclass Lonely:" in new


def test_last_function_leaves_no_trailing_blank_lines(repo, check):
    _, new = remove(repo, check, "last", "function")
    assert new.endswith("    def grow(self):\n        self.n += 1\n")


def test_emptied_class_keeps_pass(repo, check):
    d, new = remove(repo, check, "Lonely.only", "method")
    assert "class Lonely:\n    pass\n\n\nclass Shape:" in new
    assert d.deleted_symbols == ["pkg/core.py::Lonely.only"]


def test_property_getter_and_setter_go_together(repo, check):
    d, new = remove(repo, check, "Shape.sides", "method")
    assert "sides" not in new
    assert "        self.n = n\n\n    def grow(self):" in new
    assert len(d.removed) == 2


def test_class_removal_lists_its_methods(repo, check):
    d, new = remove(repo, check, "Lonely", "class")
    assert "Lonely" not in new
    assert d.deleted_symbols == ["pkg/core.py::Lonely", "pkg/core.py::Lonely.only"]
    assert "    return 3\n\n\nclass Shape:" in new


def test_removal_of_a_reexported_function_takes_the_reexport(repo, check):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="first", kind="function", lines=2, tests=[])
    d = delete(repo, cand, "function", check=check)
    assert d.files["pkg/__init__.py"] == "" and "def first" not in d.files["pkg/core.py"]
    assert d.wiring == ["pkg/__init__.py::first (import)"]


def test_removal_of_a_class_imported_by_a_sibling_is_rolled_back(repo, check):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="Shape", kind="class", lines=2, tests=[])
    with pytest.raises(RolledBack, match="pkg.user"):
        delete(repo, cand, "class", check=check)


def test_the_check_is_trusted_only_when_it_says_exactly_true(repo):
    calls = []

    def refusing(edits):
        calls.append(dict(edits))
        return "collection failed"

    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="third", kind="function", lines=2, tests=[])
    with pytest.raises(RolledBack, match="collection failed"):
        delete(repo, cand, "function", check=refusing)
    assert len(calls) == 1 and "def third" not in calls[0]["pkg/core.py"]


def test_kind_mismatch_and_missing_symbol_are_not_applicable(repo, check):
    with pytest.raises(NotApplicable, match="not found"):
        delete(repo, Candidate(repo="t", path="pkg/core.py", qualname="nope", kind="function", lines=1, tests=[]),
               "function", check=check)
    with pytest.raises(NotApplicable):
        delete(repo, Candidate(repo="t", path="pkg/core.py", qualname="Shape", kind="class", lines=1, tests=[]),
               "method", check=check)
    with pytest.raises(NotApplicable, match="test code"):
        delete(repo, Candidate(repo="t", path="tests/test_core.py", qualname="test_first", kind="function",
                               lines=1, tests=[]), "function", check=check)


def test_crlf_tabs_and_nested_classes_keep_their_layout(tmp_path):
    files = {
        "pkg/__init__.py": "",
        "pkg/crlf.py": "class K:\r\n    def only(self):\r\n        return 1\r\n",
        "pkg/tabs.py": "class T:\n\tdef m(self):  # note\n\t\tx = 1\n\t\treturn x\n\n\tdef n(self):\n\t\treturn 2\n",
        "pkg/nest.py": "class Outer:\n    x = 1\n\n    class Inner:\n        def only(self):\n            return 2\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(text.encode())
    check = import_check(tmp_path)

    def run(path, qualname, strategy):
        cand = Candidate(repo="t", path=path, qualname=qualname, kind="method", lines=2, tests=[])
        return delete(tmp_path, cand, strategy, check=check).files[path]

    assert run("pkg/crlf.py", "K.only", "method") == "class K:\r\n    pass\r\n"
    assert run("pkg/crlf.py", "K.only", "body") == "class K:\r\n    def only(self):\r\n        raise NotImplementedError\r\n"
    assert run("pkg/tabs.py", "T.m", "method") == "class T:\n\tdef n(self):\n\t\treturn 2\n"
    assert run("pkg/tabs.py", "T.m", "body").startswith("class T:\n\tdef m(self):  # note\n\t\traise NotImplementedError\n\n")
    assert run("pkg/nest.py", "Outer.Inner.only", "method").endswith("    class Inner:\n        pass\n")

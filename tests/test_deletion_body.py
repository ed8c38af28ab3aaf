"""Invariant: a `body` stub keeps each definition's signature (and its docstring unless asked to
strip it), replaces everything else with `raise NotImplementedError` at the body's indentation,
leaves the file parseable and every other file untouched, and records exactly the text it cut.
A stub that breaks import (a decorator used at import time) is rolled back by a real check."""

from __future__ import annotations

import random
import textwrap
from pathlib import Path

import pytest
from importcheck import import_check

from featdel.code.spans import has_syntax_error
from featdel.core.records import Candidate
from featdel.deletion import STRATEGIES, NotApplicable, RolledBack, delete
from tests.conftest import make_repo as write_files

CORE = '''\
"""Core."""
import functools
from typing import overload


def registry(fn):
    """Decorator used at import time."""
    fn.registered = True
    return fn


def area(w, h):
    """Area of a rectangle."""
    # multiply the sides
    return w * h


def perimeter(w, h): return 2 * (w + h)


def inline_doc(x): "Doc."; return x + 41


@functools.lru_cache(maxsize=None)
def cached(
    x,
    y=2,
):
    """Cached."""
    return x ** y


async def fetch(url):
    return url


def only_doc():
    """Nothing else."""


def abstract():
    raise NotImplementedError("subclass")


@registry
def registered():
    return 1


@overload
def conv(x: int) -> int: ...
@overload
def conv(x: str) -> str: ...
def conv(x):
    return x  # identity


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
'''


def make_repo(root: Path) -> Path:
    files = {
        "pkg/__init__.py": "from .core import area, Shape\n",
        "pkg/core.py": CORE,
        "pkg/other.py": "def untouched():\n    return 0\n",
        "tests/test_core.py": "from pkg.core import area\n\ndef test_area():\n    assert area(2, 3) == 6\n",
    }
    return write_files(root, files, commit=False)


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("repo"))


@pytest.fixture(scope="module")
def check(repo):
    return import_check(repo)


def stub(repo, check, qualname, kind="function", keep=True):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname=qualname, kind=kind, lines=1, tests=[])
    d = delete(repo, cand, "body", check=check, keep_docstrings=keep)
    assert list(d.files) == ["pkg/core.py"], "only the target file changes"
    new = d.files["pkg/core.py"]
    assert not has_syntax_error(new.encode())
    assert d.deleted_symbols == d.stubbed_symbols == [f"pkg/core.py::{qualname}"]
    for cut in d.removed:
        assert cut and cut not in new
    return d, new


def block(text: str) -> str:
    return textwrap.dedent(text)


def test_stub_keeps_signature_and_docstring(repo, check):
    d, new = stub(repo, check, "area")
    want = 'def area(w, h):\n    """Area of a rectangle."""\n    raise NotImplementedError\n\n\ndef perimeter'
    assert want in new
    assert "# multiply the sides" not in new and "return w * h" not in new
    assert d.removed == ["\n    # multiply the sides\n    return w * h"[1:]]
    assert new.replace(want, "") == CORE.replace(
        'def area(w, h):\n    """Area of a rectangle."""\n    # multiply the sides\n    return w * h\n\n\ndef perimeter', ""
    )
    assert d.keep_docstrings is True


def test_stripped_docstring_is_gone(repo, check):
    d, new = stub(repo, check, "area", keep=False)
    assert "Area of a rectangle" not in new
    assert "def area(w, h):\n    raise NotImplementedError\n" in new
    assert "Area of a rectangle" in d.removed[0]
    assert d.keep_docstrings is False


def test_one_line_body_stays_on_the_header_line(repo, check):
    d, new = stub(repo, check, "perimeter")
    assert "def perimeter(w, h): raise NotImplementedError\n" in new
    assert d.removed == ["return 2 * (w + h)"]
    _, new = stub(repo, check, "inline_doc")
    assert 'def inline_doc(x): "Doc."; raise NotImplementedError\n' in new
    _, new = stub(repo, check, "inline_doc", keep=False)
    assert "def inline_doc(x): raise NotImplementedError\n" in new


def test_decorated_multiline_header_and_async(repo, check):
    _, new = stub(repo, check, "cached")
    assert '@functools.lru_cache(maxsize=None)\ndef cached(\n    x,\n    y=2,\n):\n    """Cached."""\n    raise NotImplementedError\n' in new
    _, new = stub(repo, check, "fetch")
    assert "async def fetch(url):\n    raise NotImplementedError\n" in new


def test_docstring_only_body_gets_a_raise(repo, check):
    d, new = stub(repo, check, "only_doc")
    assert d.removed == []  # nothing was cut: the docstring stays
    assert 'def only_doc():\n    """Nothing else."""\n    raise NotImplementedError\n' in new


def test_property_getter_and_setter_are_both_stubbed(repo, check):
    d, new = stub(repo, check, "Shape.sides", kind="method")
    assert new.count("        raise NotImplementedError\n") == 2
    assert "self.n = v" not in new and "return self.n" not in new
    assert "self.n = n" in new  # __init__ untouched
    assert len(d.removed) == 2


def test_already_stubbed_body_is_not_applicable(repo, check):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="abstract", kind="function", lines=2, tests=[])
    with pytest.raises(NotApplicable, match="already a stub"):
        delete(repo, cand, "body", check=check)


def test_class_target_is_not_applicable(repo, check):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="Shape", kind="class", lines=2, tests=[])
    assert not STRATEGIES["body"].fits(cand)
    with pytest.raises(NotApplicable):
        delete(repo, cand, "body", check=check)


def test_stubbing_a_decorator_used_at_import_time_is_rolled_back(repo, check):
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="registry", kind="function", lines=4, tests=[])
    with pytest.raises(RolledBack, match="NotImplementedError"):
        delete(repo, cand, "body", check=check)


def test_root_is_never_written(repo, check):
    before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    cand = Candidate(repo="tiny", path="pkg/core.py", qualname="area", kind="function", lines=4, tests=[])
    STRATEGIES["body"].apply(repo, cand, check=check, keep_docstrings=True, rng=random.Random(0))
    assert {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()} == before


def test_overload_variants_stay_and_the_implementation_is_stubbed(repo, check):
    d, new = stub(repo, check, "conv")
    assert "def conv(x: int) -> int: ...\n@overload\ndef conv(x: str) -> str: ...\n" in new
    assert "def conv(x):\n    raise NotImplementedError\n" in new
    assert d.removed == ["    return x  # identity"]

"""Invariants of the task-quality gates and of the statement.

A stub variant is a complete edit set of the original tree that parses, differs from the original
only inside the deleted symbols' bodies (decorators, signatures and, when the task keeps them,
docstrings intact; a deleted class keeps its class-level statements and has every method body
trivial), leaves every other edit of the deletion as the deletion made it, and has a body that
is `pass`, `return <first argument>` or one that returns an object equal to
anything (tests/test_stub_equal.py); identical variants are dropped, and a removed file gives
none. Similarity scores a renamed copy left in the start state at or above `MAX_SIMILARITY`,
unrelated code well below it, and trivial code 0. The statement shows each
symbol inside its enclosing classes with its decorators, never a line of a deleted body.
Deletions come from the real strategies on tiny repositories."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from featdel.code.spans import has_syntax_error, symbols
from featdel.code.trees import apply_edits
from featdel.core.records import Candidate, Deletion
from featdel.deletion import delete, difficulty, quality, statement
from tests.conftest import make_repo

CORE = '''\
import functools


def area(w, h):
    """Area of a rectangle."""
    # multiply the sides
    return w * h


def inline(x): return x + 41


@functools.lru_cache(maxsize=None)
def cached(
    x,
    y=2,
):
    """Cached."""
    return x ** y


async def fetch(*urls, timeout: float = 1.0):
    return urls


def decorate(cls):
    cls.tag = 1
    return cls


class Shape:
    """A shape."""

    sides = 3

    def __init__(self, n):
        self.n = n

    @property
    def size(self):
        """The size."""
        return self.n

    @size.setter
    def size(self, value):
        self.n = value

    @staticmethod
    def make(*args, **kw):
        return Shape(*args)

    @classmethod
    def build(klass, n):
        return klass(n)

    class Inner:
        def go(self):
            return 1


class Error(ValueError):
    """Bad shape."""
'''

FILES = {
    "pkg/__init__.py": "from pkg.core import Shape, area\n",
    "pkg/core.py": CORE,
    "pkg/extra.py": "def spare(x):\n    return x\n",
    "pkg/api.py": "from .util import _escape, _keep\n\nLIMIT = 3\n\n\ndef report(s):\n    return _keep(_escape(s))\n",
    "pkg/util.py": (
        "def _escape(s):\n    return s.replace('<', '&lt;')\n\n\ndef _keep(s):\n    return s\n\n\n"
        "def shared(s):\n    return _keep(s)\n"
    ),
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("quality") / "repo", FILES, commit=False)


def deletion(repo: Path, qualname: str, kind: str, strategy: str, *, path: str = "pkg/core.py",
             keep: bool = True) -> Deletion:
    cand = Candidate(repo="tiny", path=path, qualname=qualname, kind=kind, lines=1, tests=[])
    return delete(repo, cand, strategy, check=lambda edits: True, keep_docstrings=keep)


def _bodies_cut(text: str, path: str, deleted: set[str]) -> str:
    """`text` without the bodies the variants may change: each deleted function's, each method's
    of a deleted class (a class with no method: its whole body); comment lines go too, since
    comments between a header and its first statement go with the body."""
    data = text.encode()
    syms = symbols(data, path)
    inside = lambda s, o: o.start_byte <= s.start_byte and s.end_byte <= o.end_byte and s != o
    cuts = []
    for sym in syms:
        if sym.qualname not in deleted or any(o.qualname in deleted and inside(sym, o) for o in syms):
            continue
        methods = [m for m in syms if m.kind == "method" and inside(m, sym)] if sym.kind == "class" else [sym]
        cuts += [(m.body_start_byte, m.end_byte) for m in methods or [sym]]
    for start, end in sorted(cuts, reverse=True):  # an inline body may come back below its header
        data = data[:start].rstrip() + data[end:]
    return re.sub(r"(?m)^[ \t]*#.*\n", "", data.decode())


def check_variants(repo: Path, d: Deletion, carried: tuple[str, str] = ("", "")) -> list[quality.StubVariant]:
    """The invariants every variant keeps; `carried` is an edit of the deletion, outside the deleted
    symbols, that the variants must keep too (old text, new text)."""
    variants = quality.stub_variants(repo, d)
    assert variants, "a symbol deletion has variants"
    assert len({tuple(sorted(v.files.items())) for v in variants}) == len(variants), "no duplicates"
    by_file: dict[str, set[str]] = {}
    for ref in d.deleted_symbols:
        by_file.setdefault(ref.partition("::")[0], set()).add(ref.partition("::")[2])
    for v in variants:
        assert v.label in quality.LABELS and set(v.files) == set(d.files)
        for path, text in v.files.items():
            if path not in by_file:
                assert text == d.files[path], "an edit outside the deleted symbols stays as the deletion made it"
                continue
            assert not has_syntax_error(text.encode()), (v.label, path)
            original = (repo / path).read_text().replace(*carried)
            assert _bodies_cut(text, path, by_file[path]) == _bodies_cut(original, path, by_file[path])
    return variants


def body_lines(text: str, path: str, qualname: str) -> list[str]:
    out = []
    data = text.encode()
    for sym in symbols(data, path):
        if sym.qualname == qualname:
            start = sym.body_start_byte if sym.docstring is None else data.index(b"\n", sym.body_start_byte)
            out.append(data[start : sym.end_byte].decode().strip())
    return out


def test_the_three_bodies_keep_docstring_and_comments_go(repo):
    d = deletion(repo, "area", "function", "body")
    variants = check_variants(repo, d)
    # `w * h` has no obvious type: an untyped equal-to-anything body, and no typed one
    assert [v.label for v in variants] == ["pass", "return first argument", "equal_anything"]
    texts = [v.files["pkg/core.py"] for v in variants]
    for text, body in zip(texts, ["pass", "return w"]):
        assert f'def area(w, h):\n    """Area of a rectangle."""\n    {body}\n\n\ndef inline' in text


def test_decorators_multiline_headers_inline_bodies_and_stars(repo):
    d = deletion(repo, "cached", "function", "body")
    text = check_variants(repo, d)[1].files["pkg/core.py"]
    assert '@functools.lru_cache(maxsize=None)\ndef cached(\n    x,\n    y=2,\n):\n    """Cached."""\n    return x\n' in text
    inline = check_variants(repo, deletion(repo, "inline", "function", "body"))
    assert [v.files["pkg/core.py"].count("def inline(x): " + b) for v, b in zip(inline, ["pass", "return x"])] == [1, 1]
    fetch = check_variants(repo, deletion(repo, "fetch", "function", "function"))
    assert body_lines(fetch[1].files["pkg/core.py"], "pkg/core.py", "fetch") == ["return urls"]
    assert fetch[1].files["pkg/core.py"] == CORE, "here a trivial body is the answer: the gate's case"
    make = check_variants(repo, deletion(repo, "Shape.make", "method", "method"))
    assert "    @staticmethod\n    def make(*args, **kw):\n        return args\n" in make[1].files["pkg/core.py"]
    # a method's first parameter is skipped whatever its name; a function's `cls` is an argument
    build = check_variants(repo, deletion(repo, "Shape.build", "method", "body"))
    assert body_lines(build[1].files["pkg/core.py"], "pkg/core.py", "Shape.build") == ["return n"]
    decorate = check_variants(repo, deletion(repo, "decorate", "function", "body"))
    assert body_lines(decorate[1].files["pkg/core.py"], "pkg/core.py", "decorate") == ["return cls"]


def test_docstring_goes_when_the_task_strips_it(repo):
    d = deletion(repo, "area", "function", "body", keep=False)
    text = check_variants(repo, d)[0].files["pkg/core.py"]
    assert "def area(w, h):\n    pass\n" in text and "Area of a rectangle" not in text


def test_property_getter_and_setter_and_a_method_with_no_argument(repo):
    d = deletion(repo, "Shape.size", "method", "body")
    variants = check_variants(repo, d)
    first = next(v for v in variants if v.label == "return first argument").files["pkg/core.py"]
    # the getter has no argument but self: `pass`; the setter returns its value
    assert body_lines(first, "pkg/core.py", "Shape.size") == ["pass", "return value"]
    assert '    @property\n    def size(self):\n        """The size."""\n        pass\n' in first
    solo = quality.stub_variants(repo, deletion(repo, "Shape.Inner.go", "method", "method"))
    assert [v.label for v in solo][:1] == ["pass"]
    assert "return first argument" not in [v.label for v in solo], "`return <nothing>` equals `pass`: dropped"


def test_a_deleted_class_is_back_with_trivial_methods_and_its_attributes(repo):
    d = deletion(repo, "Shape", "class", "class")
    assert "pkg/core.py::Shape.Inner.go" in d.deleted_symbols
    variants = check_variants(repo, d)
    plain = variants[0].files["pkg/core.py"]
    assert '    """A shape."""\n\n    sides = 3\n\n    def __init__(self, n):\n        pass\n' in plain
    assert "        def go(self):\n            pass\n" in plain
    first = variants[1].files["pkg/core.py"]
    assert "    def __init__(self, n):\n        pass\n" in first, "__init__ must not return a value"
    error = check_variants(repo, deletion(repo, "Error", "class", "class"))
    assert [v.label for v in error] == ["pass"]
    assert "class Error(ValueError):\n    pass\n" in error[0].files["pkg/core.py"]


def test_a_feature_keeps_its_other_edits(repo):
    d = deletion(repo, "report", "function", "feature", path="pkg/api.py")
    assert d.deleted_symbols == ["pkg/api.py::report", "pkg/util.py::_escape"]
    for v in check_variants(repo, d, ("import _escape, _keep", "import _keep")):
        api = v.files["pkg/api.py"]
        assert api.startswith("from .util import _keep\n"), "the dropped import stays dropped"
        assert "def _escape(s):\n" in v.files["pkg/util.py"] and "&lt;" not in v.files["pkg/util.py"]


def test_a_removed_file_gives_no_variant(repo):
    d = deletion(repo, "pkg/extra.py", "file", "file", path="pkg/extra.py")
    assert d.files == {"pkg/extra.py": None}
    assert quality.stub_variants(repo, d) == []


HAS = '''\
import inspect


def _has_varargs(func):
    sig = inspect.signature(func)
    for param in sig.parameters.values():
        if param.kind == inspect.Parameter.VAR_POSITIONAL:
            return True
    return False


def _has_keywords(fn):
    signature = inspect.signature(fn)
    for p in signature.parameters.values():
        if p.kind == inspect.Parameter.VAR_KEYWORD:
            return True
    return False


def describe(shape, unit="cm"):
    width, height = shape.size
    area = round(width * height / 100.0, 2)
    label = "%s: %s %s^2" % (shape.name, area, unit)
    return label.strip() or None


def tiny(x):
    pass
'''

CACHES = '''\
import collections


class LRU:
    def __init__(self):
        self.order = collections.OrderedDict()

    def update(self, key):
        try:
            self.order.move_to_end(key)
        except KeyError:
            self.order[key] = None


class MRU:
    def __init__(self):
        self.order = collections.OrderedDict()

    def update(self, key):
        try:
            self.order.move_to_end(key, last=False)
        except KeyError:
            self.order[key] = None
'''


@pytest.fixture(scope="module")
def sim_repo(tmp_path_factory) -> Path:
    files = {"lib/__init__.py": "", "lib/sig.py": HAS, "lib/caches.py": CACHES,
             "tests/test_sig.py": "def test_copy(fn):\n" + HAS.split("def _has_keywords(fn):\n")[1].split("\n\n")[0]}
    return make_repo(tmp_path_factory.mktemp("sim") / "repo", files, commit=False)


def start_state(repo: Path, d: Deletion, dest: Path) -> Path:
    shutil.copytree(repo, dest)
    apply_edits(dest, d.files)
    return dest


def test_a_renamed_copy_is_at_the_threshold_and_unrelated_code_is_not(sim_repo, tmp_path):
    d = deletion(sim_repo, "_has_keywords", "function", "function", path="lib/sig.py")
    start = start_state(sim_repo, d, tmp_path / "start")
    sim = quality.similarity(d.removed, start, exclude=set(d.deleted_symbols))
    assert sim.score >= quality.MAX_SIMILARITY and sim.nearest == "lib/sig.py::_has_varargs"
    without = quality.similarity(d.removed, start, exclude={"lib/sig.py::_has_varargs"})
    assert without.score < 0.5, without
    mru = deletion(sim_repo, "MRU.update", "method", "body", path="lib/caches.py")
    sim = quality.similarity(mru.removed, start_state(sim_repo, mru, tmp_path / "mru"))
    assert sim.score >= quality.MAX_SIMILARITY and sim.nearest == "lib/caches.py::LRU.update"
    whole = deletion(sim_repo, "MRU", "class", "class", path="lib/caches.py")
    sim = quality.similarity(whole.removed, start_state(sim_repo, whole, tmp_path / "cls"))
    assert sim.score >= quality.MAX_SIMILARITY and sim.nearest == "lib/caches.py::LRU"


def test_unrelated_and_trivial_code_score_low(sim_repo):
    other = deletion(sim_repo, "describe", "function", "function", path="lib/sig.py")
    sim = quality.similarity(other.removed, sim_repo, exclude={"lib/sig.py::describe"})
    assert 0 < sim.score < 0.5, sim
    assert quality.similarity(["pass\n", "    return x\n"], sim_repo) == quality.Similarity(score=0.0)
    assert quality.similarity([], sim_repo).score == 0.0


def test_statement_shows_classes_and_decorators_never_a_body(repo):
    d = deletion(repo, "Shape.size", "method", "body")
    text = statement.write(d, repo, ["tests/test_core.py::test_size"])
    assert ('  ```python\n  class Shape:\n      @property\n      def size(self):\n          """The size."""\n'
            "      @size.setter\n      def size(self, value):\n  ```\n") in text
    assert "return self.n" not in text and "self.n = value" not in text
    nested = statement.write(deletion(repo, "Shape.Inner.go", "method", "method"), repo, [])
    assert "  class Shape:\n      class Inner:\n          def go(self):\n  ```" in nested
    cached = statement.write(deletion(repo, "cached", "function", "body"), repo, [])
    assert '  @functools.lru_cache(maxsize=None)\n  def cached( x, y=2, ):\n      """Cached."""\n' in cached
    cls = statement.write(deletion(repo, "Shape", "class", "class"), repo, [])
    assert cls.count("- `Shape") == 1, "a deleted class's methods are shown inside it"
    assert "      @staticmethod\n      def make(*args, **kw):\n" in cls and "sides = 3" not in cls


def test_difficulty_reports_similarity(sim_repo, tmp_path):
    d = deletion(sim_repo, "_has_keywords", "function", "function", path="lib/sig.py")
    feats = difficulty.features(d, start_state(sim_repo, d, tmp_path / "start"), ["t::a"], [])
    assert feats["similarity"] >= quality.MAX_SIMILARITY


def test_a_large_new_feature_with_a_small_copied_helper_is_scored_by_size(sim_repo, tmp_path):
    copied = deletion(sim_repo, "_has_keywords", "function", "function", path="lib/sig.py")
    start = start_state(sim_repo, copied, tmp_path / "start")
    alone = quality.similarity(copied.removed, start, exclude=set(copied.deleted_symbols))
    novel = "def feature(rows, key):\n" + "".join(
        f"    total_{i} = sum(r[key] * {i} for r in rows if r.get('k{i}') is not None)\n" for i in range(12)
    ) + "    return [total_0, total_1, total_2]\n"
    both = quality.similarity([*copied.removed, novel], start, exclude=set(copied.deleted_symbols))
    assert alone.score >= quality.MAX_SIMILARITY
    assert both.score < quality.MAX_SIMILARITY and both.score < alone.score

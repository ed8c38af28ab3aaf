"""Invariants of the equal-to-anything stub variants (featdel.deletion.equal_stub) and of the gate they feed.

`equal_anything` gives every deleted function or method that returns a value a body returning an
object whose `__eq__` says yes, `__ne__` no, whose hash is 0 and which is truthy; `equal_typed`
makes it a subclass of the annotated return type, else of the one type the original `return`
values obviously have, and falls back to the generic object when that type cannot be built. Both
variants parse and import, keep everything outside the bodies, and give generators, coroutines,
dunders, setters and overloads their trivial body; a variant equal to another is dropped. In the
verify stage a test that only such a stub passes leaves F2P, and a task left with none is rejected
at `stub` naming the variant, while tests that call a method on the result or check its exact type
keep the task.
"""

from __future__ import annotations

import builtins
from pathlib import Path

import pytest

from featdel.core.records import Candidate, VerdictStatus
from featdel.deletion import quality
from tests.conftest import make_repo
from tests.test_quality import body_lines, check_variants, deletion

MOD = '''\
import enum
from typing import List, Optional, overload

_TABLE = {0: "digits", 1: "signed"}


class Token:
    def __init__(self, text):
        self.text = text

    def upper(self):
        return Token(self.text.upper())


class Color(enum.Enum):
    RED = 1


def pattern(alg):
    return _TABLE[alg]


def name(x) -> str:
    return x


def greet(x):
    return f"hi {x}"


def raw(x):
    return b"<" + x


def count(xs):
    if not xs:
        return 0
    return len(xs)


def pairs(xs) -> Optional[List[int]]:
    return xs


def table(xs):
    return {x: 1 for x in xs}


def both(x):
    return x, x


def tok(x) -> "Token":
    return x


def make(x):
    return Token(x)


def color(x) -> Color:
    return x


def flag(x) -> bool:
    return x > 0


def mixed(x):
    if x:
        return "a"
    return 1


def gen(xs):
    yield from xs


async def coro(x):
    return x


@overload
def conv(x: int) -> int: ...
@overload
def conv(x: str) -> str: ...
def conv(x):
    return x


def inline(x): return str(x)


def inline_doc(x): "Doc."; return x


class Box:
    def __init__(self, v):
        self.v = v

    def __eq__(self, other):
        return self.v == other.v

    @property
    def size(self) -> int:
        return self.v

    @size.setter
    def size(self, value):
        self.v = value

    def get(self):
        return self.v
'''
PATH = "pkg/mod.py"


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    return make_repo(tmp_path_factory.mktemp("equal") / "repo", {"pkg/__init__.py": "", PATH: MOD}, commit=False)


def variants(repo: Path, qualname: str, kind: str = "function", strategy: str = "body") -> dict[str, dict]:
    """label -> the variant's module namespace, executed (so it imports), for every variant."""
    out = {}
    for v in check_variants(repo, deletion(repo, qualname, kind, strategy, path=PATH)):
        ns: dict = {"__name__": "pkg.mod"}
        exec(compile(v.files[PATH], PATH, "exec"), ns)
        out[v.label] = ns | {"__text__": v.files[PATH]}
    return out


def assert_equal_to_anything(value) -> None:
    assert value == "anything" and value == 3 and "anything" == value and [1] == value and value == None  # noqa: E711
    assert not (value != "anything") and hash(value) == 0 and bool(value)


def test_equal_anything_returns_an_object_equal_to_anything(repo):
    got = variants(repo, "pattern")
    assert list(got) == ["pass", "return first argument", "equal_anything"], "no type: no typed variant"
    value = got["equal_anything"]["pattern"](0)
    assert_equal_to_anything(value)
    assert not isinstance(value, str) and repr(value) == "<equal to anything>"
    assert "def __eq__(self, other): return True" in got["equal_anything"]["__text__"]


@pytest.mark.parametrize(("qualname", "typ"), [
    ("name", "str"), ("greet", "str"), ("raw", "bytes"), ("count", "int"), ("pairs", "list"), ("table", "dict"),
    ("both", "tuple"), ("tok", "Token"), ("make", "Token")])
def test_equal_typed_subclasses_the_annotated_or_obvious_return_type(repo, qualname, typ):
    got = variants(repo, qualname)
    assert list(got)[-2:] == ["equal_anything", "equal_typed"]
    ns = got["equal_typed"]
    assert f"class _EqualTyped(_EqualToAnything, {typ}):" in ns["__text__"]
    cls = ns[typ] if typ in ns else getattr(builtins, typ)
    value = ns[qualname]("x")
    assert isinstance(value, cls) and type(value) is not cls
    assert_equal_to_anything(value)
    assert not isinstance(got["equal_anything"][qualname]("x"), cls)


def test_a_method_called_on_the_result_or_its_exact_type_still_tells(repo):
    text = variants(repo, "name")["equal_typed"]["name"]("a")
    assert text.upper() != "A" and type(text) is not str
    token = variants(repo, "make")["equal_typed"]["make"]("a")
    with pytest.raises(AttributeError):  # built with `__new__` alone: no `__init__` ran
        token.upper()


def test_a_type_that_cannot_be_built_falls_back_to_the_generic_object(repo):
    value = variants(repo, "color")["equal_typed"]["color"]("x")  # an Enum cannot be subclassed
    assert_equal_to_anything(value)
    assert type(value).__name__ == "_EqualToAnything"


@pytest.mark.parametrize("qualname", ["flag", "mixed"])
def test_no_typed_variant_for_bool_or_disagreeing_returns(repo, qualname):
    assert list(variants(repo, qualname))[-1] == "equal_anything"


@pytest.mark.parametrize(("qualname", "kind"), [("gen", "function"), ("coro", "function"), ("Box.__eq__", "method"),
                                                ("Box.__init__", "method")])
def test_generators_coroutines_and_dunders_keep_trivial_bodies(repo, qualname, kind):
    labels = list(variants(repo, qualname, kind))
    assert not set(labels) & {"equal_anything", "equal_typed"}, labels


def test_overloads_keep_pass_and_the_implementation_gets_the_object(repo):
    d = deletion(repo, "conv", "function", "function", path=PATH)
    v = next(v for v in quality.stub_variants(repo, d) if v.label == "equal_anything")
    bodies = body_lines(v.files[PATH], PATH, "conv")
    assert bodies[:2] == ["pass", "pass"] and "return _EqualToAnything()" in bodies[2]


def test_inline_bodies_move_below_the_header(repo):
    got = variants(repo, "inline")
    assert "def inline(x):\n    class _EqualToAnything:\n        __slots__ = ()\n" in got["equal_typed"]["__text__"]
    assert isinstance(got["equal_typed"]["inline"](1), str)
    doc = variants(repo, "inline_doc")["equal_anything"]
    assert doc["inline_doc"].__doc__ == "Doc."
    assert_equal_to_anything(doc["inline_doc"](1))


def test_a_property_getter_gets_the_object_and_its_setter_pass(repo):
    got = variants(repo, "Box.size", "method")
    getter, setter = body_lines(got["equal_typed"]["__text__"], PATH, "Box.size")
    assert "class _EqualTyped(_EqualToAnything, int):" in getter and setter == "pass"
    box = got["equal_typed"]["Box"](3)
    assert isinstance(box.size, int) and box.size == 4


def test_a_deleted_class_gets_the_object_in_its_methods_but_not_its_dunders(repo):
    got = variants(repo, "Box", "class", "class")
    text = got["equal_anything"]["__text__"]
    assert body_lines(text, PATH, "Box.__init__") == ["pass"] and body_lines(text, PATH, "Box.__eq__") == ["pass"]
    assert_equal_to_anything(got["equal_anything"]["Box"](1).get())


# A tiny library whose tests compare results with `==`: the regex chooser's tests (as natsort's
# `numeric_regex_chooser(alg) == expected`) and `shout`'s (one with an `isinstance` check, which
# only the typed stub passes) are earned by the object equal to anything; `label`'s call a
# method on the result or check its exact type; `tag` has one test of each kind.
EQLIB = {
    "pyproject.toml": (
        '[project]\nname = "eqlib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "eqlib/__init__.py": "",
    "eqlib/regex.py": (
        '_TABLE = {0: r"\\d+", 1: r"[-+]?\\d+", 2: r"[-+]?\\d*\\.?\\d+"}\n\n\n'
        "def numeric_regex_chooser(alg):\n"
        '    """The regular expression for the kind of number `alg` names."""\n'
        "    key = alg & 3\n    if key not in _TABLE:\n        raise ValueError(f'no regex for {alg}')\n"
        "    return _TABLE[key]\n"
    ),
    "eqlib/text.py": (
        "def shout(s) -> str:\n    \"\"\"Upper-case and exclaim.\"\"\"\n"
        "    out = s.strip()\n    return out.upper() + '!'\n\n\n"
        "def label(s):\n    \"\"\"Title-case.\"\"\"\n    out = s.strip()\n    return out.title()\n\n\n"
        "def tag(s):\n    \"\"\"A hash tag.\"\"\"\n    out = s.strip().lower()\n    return '#' + out\n"
    ),
    "tests/test_regex.py": (
        "from eqlib.regex import numeric_regex_chooser\n\n\n"
        "def test_digits():\n    assert numeric_regex_chooser(0) == r'\\d+'\n\n\n"
        "def test_signed():\n    assert numeric_regex_chooser(1) == r'[-+]?\\d+'\n\n\n"
        "def test_float():\n    assert numeric_regex_chooser(2) == r'[-+]?\\d*\\.?\\d+'\n"
    ),
    "tests/test_text.py": (
        "from eqlib.text import label, shout, tag\n\n\n"
        "def test_shout():\n    assert shout(' a ') == 'A!'\n\n\n"
        "def test_shout_is_text():\n    out = shout('b')\n    assert isinstance(out, str) and out == 'B!'\n\n\n"
        "def test_label_method():\n    assert label(' ab cd ').lower() == 'ab cd'\n\n\n"
        "def test_label_exact_type():\n    out = label('x y')\n    assert type(out) is str and out == 'X Y'\n\n\n"
        "def test_tag():\n    assert tag(' A ') == '#a'\n\n\n"
        "def test_tag_prefix():\n    assert tag('B').startswith('#b')\n"
    ),
}


@pytest.fixture(scope="module")
def eqlib(tmp_path_factory, featdel_cache, local_backend):
    from featdel.code.trees import extract
    from featdel.pipeline.context import RepoContext
    from tests.conftest import mine_tiny

    run_dir, record = mine_tiny(tmp_path_factory, "eqlib", EQLIB, local_backend)
    ctx = RepoContext.load(run_dir, record)
    return ctx, extract(ctx.snapshot, tmp_path_factory.mktemp("eqlib-orig") / "orig"), record.name


def verify(eqlib, local_backend, path: str, qualname: str, tests: list[str]):
    from featdel.deletion import delete
    from featdel.pipeline.verify import VerifyOptions, verify_one

    ctx, original, repo = eqlib
    cand = Candidate(repo=repo, path=path, qualname=qualname, kind="function", lines=4, tests=tests)
    return verify_one(ctx, delete(original, cand, "body", check=lambda edits: True), local_backend,
                      VerifyOptions(reruns=1))


def test_a_task_whose_tests_only_compare_is_rejected_at_stub(eqlib, local_backend):
    tests = [f"tests/test_regex.py::test_{n}" for n in ("digits", "signed", "float")]
    verdict = verify(eqlib, local_backend, "eqlib/regex.py", "numeric_regex_chooser", tests)
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "stub"), verdict
    assert "(equal_anything) passes all 3 failing tests" in verdict.reason


def test_an_isinstance_check_next_to_the_comparison_is_passed_by_the_typed_stub(eqlib, local_backend):
    tests = ["tests/test_text.py::test_shout", "tests/test_text.py::test_shout_is_text"]
    verdict = verify(eqlib, local_backend, "eqlib/text.py", "shout", tests)
    assert (verdict.status, verdict.stage) == (VerdictStatus.REJECTED, "stub"), verdict
    assert "(equal_anything, equal_typed) passes all 2" in verdict.reason


def test_a_method_on_the_result_or_its_exact_type_keeps_the_task(eqlib, local_backend):
    tests = ["tests/test_text.py::test_label_method", "tests/test_text.py::test_label_exact_type"]
    verdict = verify(eqlib, local_backend, "eqlib/text.py", "label", tests)
    assert verdict.status == VerdictStatus.VERIFIED, verdict
    assert sorted(verdict.FAIL_TO_PASS) == sorted(tests) and verdict.stub_passed == []


def test_a_comparison_only_test_leaves_f2p_and_the_rest_stays(eqlib, local_backend):
    tests = ["tests/test_text.py::test_tag", "tests/test_text.py::test_tag_prefix"]
    verdict = verify(eqlib, local_backend, "eqlib/text.py", "tag", tests)
    assert verdict.status == VerdictStatus.VERIFIED, verdict
    assert verdict.FAIL_TO_PASS == ["tests/test_text.py::test_tag_prefix"]
    assert verdict.stub_passed == ["tests/test_text.py::test_tag"]

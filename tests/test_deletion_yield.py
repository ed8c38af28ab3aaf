"""Invariant: a feature removed with its wiring verifies even though test modules import its names:
a test module whose collection fails only because it imports a deleted name is allowed and its
baseline-passing tests are F2P (not collected in the start state is a failure, for verification
and for the grader alike), while any other collection error rejects; a public helper no other
source code uses goes with the feature; a rolled-back deletion is a candidate (stage `build`) and
a refusal is not; `combine` joins verified disjoint deletions into one task whose F2P is the union
of its parts', verified again as a whole."""

from __future__ import annotations

import pytest

from featdel.code.gone import allowed, named
from featdel.core.records import VerdictStatus
from featdel.pipeline.delete import combine_all
from featdel.pipeline.verify import VerifyOptions, verify_all
from tests.conftest import delete_and_verify, mine_tiny

WORDS = '''\
def _exclaim(s):
    return s + "!"


def shout(s):
    """Upper-case and exclaim."""
    text = s.upper()
    return _exclaim(text)


def plain(s):
    return s


def suffix(n):
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def ordinalish(n):
    """The number with its English ordinal suffix."""
    text = str(n)
    return text + suffix(n)
'''

FEATLIB = {
    "pyproject.toml": (
        '[project]\nname = "featlib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "featlib/__init__.py": "from featlib.words import shout\n\nfrom featlib.words import plain\n\n"
                           "from featlib.words import ordinalish\n",
    "featlib/words.py": WORDS,
    # the exact type too: an object equal to anything (a stub variant) must not pass
    "tests/test_shout.py": "from featlib import shout\n\n\n"
                           "def test_shout():\n    assert (type(shout('hi')), shout('hi')) == (str, 'HI!')\n\n\n"
                           "def test_shout_empty():\n    assert (type(shout('')), shout('')) == (str, '!')\n",
    "tests/test_ordinal.py": "from featlib import ordinalish\nfrom featlib.words import suffix\n\n\n"
                             "def test_ordinalish():\n    out = ordinalish(2)\n"
                             "    assert (type(out), out) == (str, '2nd')\n\n\n"
                             "def test_suffix():\n    assert (type(suffix(13)), suffix(13)) == (str, 'th')\n",
    "tests/test_plain.py": "from featlib import plain\n\n\ndef test_plain():\n    assert plain('a') == 'a'\n\n\n"
                           "def test_plain_b():\n    assert plain('b') == 'b'\n\n\n"
                           "def test_plain_c():\n    assert plain('c') == 'c'\n",
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, featdel_cache, local_backend):
    run_dir, _ = mine_tiny(tmp_path_factory, "featlib", FEATLIB, local_backend)
    delete_and_verify(run_dir, local_backend, strategies=["feature"], max_candidates=4, reruns=1)
    combine_all(run_dir, seed=0)
    verdicts = verify_all(run_dir, local_backend, VerifyOptions(reruns=1))
    return run_dir, {v.target: v for v in verdicts}


def test_feature_with_reexport_and_importing_tests_verifies(run):
    _, verdicts = run
    v = verdicts["featlib/words.py::shout"]
    assert v.status == VerdictStatus.VERIFIED, v.reason
    # test_shout.py cannot even be collected in the start state: both of its tests are F2P
    assert v.FAIL_TO_PASS == ["tests/test_shout.py::test_shout", "tests/test_shout.py::test_shout_empty"]
    assert "-from featlib.words import shout\n" in v.deletion_patch


def test_public_helper_only_the_feature_uses_goes_with_it(run):
    run_dir, verdicts = run
    v = verdicts["featlib/words.py::ordinalish"]
    assert v.status == VerdictStatus.VERIFIED, v.reason
    assert "-def suffix(n):" in v.deletion_patch and "def plain" not in v.deletion_patch.replace(" def plain", "")
    assert set(v.FAIL_TO_PASS) == {"tests/test_ordinal.py::test_ordinalish", "tests/test_ordinal.py::test_suffix"}
    assert "tests/test_plain.py::test_plain" in v.PASS_TO_PASS


def test_combined_task_is_the_union_of_its_parts(run):
    _, verdicts = run
    [combined] = [v for v in verdicts.values() if v.strategy == "combine" and v.stage != "delete"]
    assert combined.status == VerdictStatus.VERIFIED, combined.reason
    parts = [verdicts["featlib/words.py::shout"], verdicts["featlib/words.py::ordinalish"]]
    assert set(combined.FAIL_TO_PASS) == {t for p in parts for t in p.FAIL_TO_PASS}
    assert set(combined.target.split(" + ")) == {"featlib/words.py::shout", "featlib/words.py::ordinalish"}


def test_refusals_are_not_candidates(run):
    _, verdicts = run
    suffix = verdicts["featlib/words.py::suffix"]  # ordinalish uses it: no helper of its own
    assert suffix.stage == "delete" and "no helper" in suffix.reason  # a refusal, counted apart


IMPORT_ERROR = (
    "ImportError while importing test module '/src/tests/test_shout.py'.\nHint: make sure ...\n"
    "Traceback:\ntests/test_shout.py:1: in <module>\n    from featlib import shout\n"
    "E   ImportError: cannot import name 'shout' from 'featlib' (/src/featlib/__init__.py)"
)
ATTRIBUTE_ERROR = "tests/test_x.py:3: in <module>\n    F = pkg.shout\nE   AttributeError: module 'pkg' has no attribute 'shout'"


def test_only_errors_naming_a_deleted_name_in_a_test_module_are_allowed():
    assert named(IMPORT_ERROR) == "shout" and named(ATTRIBUTE_ERROR) == "shout"
    assert allowed({"tests/test_shout.py": IMPORT_ERROR, "tests/test_x.py": ATTRIBUTE_ERROR}, {"shout"}) == (
        {"tests/test_shout.py", "tests/test_x.py"}, None)
    ok, why = allowed({"tests/test_shout.py": IMPORT_ERROR}, {"whisper"})
    assert ok == set() and "cannot import name 'shout'" in why
    _, why = allowed({"tests/conftest.py": IMPORT_ERROR}, {"shout"})
    assert why, "a conftest that fails is a broken suite, not a missing feature"
    _, why = allowed({"tests/test_shout.py": IMPORT_ERROR + "\nE   NameError: name 'x' is not defined"}, {"shout"})
    assert why, "the last exception line decides"


def test_deleted_names_are_definitions_re_exports_and_modules_that_went():
    from featdel.code.gone import deleted_names

    original = {
        "pkg/__init__.py": b"from pkg.words import shout, plain\nALIAS = plain\n",
        "pkg/words.py": b"def shout(s, loud):\n    return s\n\n\ndef plain(s, quiet):\n    return s\n",
    }
    edits = {"pkg/__init__.py": "from pkg.words import plain\n", "pkg/words.py": "def plain(s, quiet):\n    return s\n",
             "pkg/extra.py": None}
    names = deleted_names(original.__getitem__, edits, lambda rel: rel[:-3].replace("/", "."))
    # `loud` (an argument of the removed function) is not a name anything could import
    assert names == {"shout", "ALIAS", "pkg.extra", "extra"}

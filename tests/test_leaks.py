"""The leak audit finds deleted code wherever a learner could reach it: a file of the start
state, git history (compressed objects), bytecode caches, an installed copy in the environment,
and the problem statement. Scrubbing removes the caches and build outputs before the audit."""

from __future__ import annotations

import py_compile
import subprocess

from featdel.code import leaks, trees
from tests.conftest import make_repo

REMOVED = "def secret_sauce(x):\n    total = x * 41 + compute_offset(x)\n    return normalise_result(total)\n"
OTHER = "def other(y):\n    return y + 1\n"


def original(tmp_path):
    return make_repo(tmp_path / "orig", {"pkg/__init__.py": "", "pkg/mod.py": REMOVED + "\n\n" + OTHER}, commit=False)


def test_needles_are_distinctive_deleted_lines(tmp_path):
    orig = original(tmp_path)
    found = leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER})
    assert "total = x * 41 + compute_offset(x)" in found
    assert "return normalise_result(total)" in found
    assert "return y + 1" not in found


def test_a_long_line_kept_inside_a_longer_line_is_no_needle(tmp_path):
    """The audit finds a long needle inside longer lines too (in bytecode, in git objects), so a
    deleted line that the kept code holds inside a longer one is not distinctive: it would find
    the kept line, in the start state and in its git objects. click 8.1.7 lost candidates so."""
    removed = "def complete(names, incomplete):\n    return [n for n in names\n            if n.startswith(incomplete)\n            and not n.startswith('_')]\n"
    kept = "def visible(names, incomplete):\n    for n in names:\n        if n.startswith(incomplete):\n            yield n\n"
    orig = make_repo(tmp_path / "orig", {"pkg/__init__.py": "", "pkg/mod.py": removed + "\n\n" + kept}, commit=False)
    found = leaks.needles([removed], orig, {"pkg/mod.py": kept})
    assert "if n.startswith(incomplete)" not in found and "and not n.startswith('_')]" in found
    start = make_repo(tmp_path / "start", {"pkg/__init__.py": "", "pkg/mod.py": kept})
    assert leaks.audit(found, [start]) is None
    assert leaks.audit(found, [make_repo(tmp_path / "copy", {"pkg/mod.py": removed + kept})])  # a copy still is one


def test_clean_start_state_passes(tmp_path):
    orig = original(tmp_path)
    start = make_repo(tmp_path / "start", {"pkg/__init__.py": "", "pkg/mod.py": OTHER})
    assert leaks.audit(leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER}), [start]) is None


def test_git_history_is_searched_decompressed(tmp_path):
    orig = original(tmp_path)
    start = make_repo(tmp_path / "start", {"pkg/__init__.py": "", "pkg/mod.py": REMOVED})
    (start / "pkg" / "mod.py").write_text(OTHER)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "delete"], cwd=start, check=True)
    (start / "pkg" / "mod.py").write_text(OTHER)
    hit = leaks.audit(leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER}), [start / ".git"])
    assert hit and "objects" in hit


def test_bytecode_and_caches_are_found_then_scrubbed(tmp_path):
    orig = original(tmp_path)
    start = make_repo(tmp_path / "start", {"pkg/__init__.py": "", "pkg/mod.py": OTHER}, commit=False)
    cache = start / ".mypy_cache" / "3.11" / "pkg"
    cache.mkdir(parents=True)
    (cache / "mod.data.json").write_text('{"src": "    total = x * 41 + compute_offset(x)\\n"}')
    leftover = tmp_path / "old.py"
    leftover.write_text(REMOVED)
    (start / "pkg" / "__pycache__").mkdir()
    py_compile.compile(str(leftover), cfile=str(start / "pkg" / "__pycache__" / "mod.cpython-311.pyc"))
    needles = leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER})
    assert leaks.audit(needles, [start]) is not None
    removed = trees.scrub(start)
    assert ".mypy_cache" in removed and "pkg/__pycache__" in removed
    assert leaks.audit(needles, [start]) is None


def test_installed_copy_in_the_environment_is_found(tmp_path):
    orig = original(tmp_path)
    site = tmp_path / "venv" / "lib" / "site-packages" / "pkg"
    site.mkdir(parents=True)
    (site / "mod.py").write_text(REMOVED)
    needles = leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER})
    assert leaks.audit(needles, [], third_party=[tmp_path / "venv"]) is not None


def test_problem_statement_is_audited(tmp_path):
    orig = original(tmp_path)
    needles = leaks.needles([REMOVED], orig, {"pkg/mod.py": OTHER})
    hit = leaks.audit(needles, [], {"problem_statement": "Hint:\n    return normalise_result(total)\n"})
    assert hit and hit.startswith("problem_statement")



def test_a_short_deleted_line_quoted_inside_a_sentence_of_the_statement_is_found(tmp_path):
    removed = "def cube_less(x):\n    y = x ** 3 - 7\n    return abs(y)\n"
    orig = make_repo(tmp_path / "orig", {"pkg/__init__.py": "", "pkg/mod.py": removed + "\n\n" + OTHER}, commit=False)
    needles = leaks.needles([removed], orig, {"pkg/mod.py": OTHER}, {"def cube_less(x):"})
    assert needles == ["return abs(y)", "y = x ** 3 - 7"] and all(len(n) < leaks.LONG_NEEDLE for n in needles)
    quoted = "Compute `y = x ** 3 - 7` first, then take its absolute value."
    assert leaks.audit(needles, [], {"problem_statement": quoted}) == "problem_statement: y = x ** 3 - 7"
    assert leaks.audit(needles, [], {"problem_statement": "It cubes x, subtracts 7, returns the size."}) is None
    # in the tree a short line must be a whole line (inside other text it is too common to count)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text(quoted + "\n")
    assert leaks.audit(needles, [tmp_path / "notes"]) is None

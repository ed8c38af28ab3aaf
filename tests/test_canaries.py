"""Canaries planted in a tree's F2P test files, run by real pytest.

Pins: on an honest implementation every canary comes back right (twins agree with their
originals even when a parameter can be used only once, the must-fail and both variants fail, the
must-pass passes); on a result that compares equal to anything, or to every string, a variant
passes and `Canary.wrong` says so; names are new every time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from featdel.grading.canaries import plant

LIB = "def shout(s):\n    return s.upper() + '!'\n"
EQUAL_ANYTHING = (
    "class _Any(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n\n\n"
    "def shout(s):\n    return _Any('')\n"
)
EQUAL_EVERY_STR = (
    "class _Str(str):\n    def __eq__(self, other):\n        return isinstance(other, str)\n"
    "    __hash__ = str.__hash__\n\n\ndef shout(s):\n    return _Str('')\n"
)
TESTS = (
    "import contextlib\nimport pytest\nfrom lib import shout\n\n\n"
    "@contextlib.contextmanager\ndef once():\n    yield\n\n\n"
    "def test_shout():\n    assert shout('hi') == 'HI!'\n\n\n"
    "@pytest.mark.parametrize('ctx', [once()])\ndef test_in_context(ctx):\n    with ctx:\n"
    "        assert shout('a') == 'A!'\n\n\n"
    "class TestMore:\n    def test_empty(self):\n        assert '!' == shout('')\n"
)
F2P = ["tests/test_lib.py::test_shout", "tests/test_lib.py::test_in_context[ctx0]",
       "tests/test_lib.py::TestMore::test_empty"]


def _run(tmp_path: Path, lib: str, held: list = (), tests: str = TESTS, f2p: list[str] = F2P
         ) -> tuple[list, dict[str, str]]:
    (tmp_path / "tests").mkdir(parents=True)
    (tmp_path / "lib.py").write_text(lib)
    (tmp_path / "tests" / "test_lib.py").write_text(tests)
    canaries = plant(tmp_path, f2p, held=held)
    report = tmp_path / "report.jsonl"
    plugin = tmp_path / "outcomes.py"
    plugin.write_text(
        "import json\n\n\ndef pytest_runtest_logreport(report):\n"
        "    if report.when == 'call' or report.outcome != 'passed':\n"
        f"        open({str(report)!r}, 'a').write(json.dumps([report.nodeid, report.outcome]) + '\\n')\n")
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "outcomes", "tests"],
                   cwd=tmp_path, capture_output=True, text=True, timeout=120,
                   env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    outcomes: dict[str, str] = {}
    for line in report.read_text().splitlines():
        node, outcome = json.loads(line)
        outcomes[node] = outcome if outcomes.get(node, "passed") == "passed" else outcomes[node]
    return canaries, outcomes


def test_an_honest_run_gets_every_canary_right(tmp_path):
    canaries, outcomes = _run(tmp_path, LIB)
    kinds = sorted(c.kind for c in canaries)
    # no variant for the assertion inside `with`: a nested assertion may never run
    assert kinds.count("twin") == 3 and kinds.count("fresh") == 2 and kinds.count("perturbed") == 2
    assert {"must_fail", "must_pass"} <= set(kinds)
    assert all(outcomes.get(t) == "passed" for t in F2P), outcomes
    assert [c.wrong(outcomes, resolved=True) for c in canaries] == [None] * len(canaries), outcomes
    # the twin of the test whose parameter can be entered once ran with a parameter of its own
    twin = next(c for c in canaries if c.kind == "twin" and c.original == F2P[1])
    assert outcomes[twin.node_id] == "passed"


UNITTEST = (
    "import unittest\nfrom lib import shout\n\n\n"
    "def test_latest():\n    assert shout('hi') == 'HI!'\n\n\n"
    "class Conformance(unittest.TestCase):\n    def runTest(self):\n        self.assertEqual(shout('a'), 'A!')\n\n\n"
    "class Shouting(unittest.TestCase):\n    def testLoudTest(self):\n        self.assertEqual(shout('b'), 'B!')\n"
)
UNITTEST_F2P = ["tests/test_lib.py::test_latest", "tests/test_lib.py::Conformance::runTest",
                "tests/test_lib.py::Shouting::testLoudTest"]


def test_every_copy_is_collected_and_runtest_gets_none(tmp_path):
    """A name that starts and ends with `test` keeps both (`t<hex>_test_latest` matched no `test*`
    collector, so an honest gold run missed its copies); unittest's `runTest` gets no copy (one
    beside it is never collected, and a `test*` one would stop the original being collected)."""
    canaries, outcomes = _run(tmp_path, LIB, tests=UNITTEST, f2p=UNITTEST_F2P)
    assert all(outcomes.get(t) == "passed" for t in UNITTEST_F2P), outcomes
    assert not [c for c in canaries if c.original == UNITTEST_F2P[1]]
    assert {c.original for c in canaries if c.kind == "twin"} == {UNITTEST_F2P[0], UNITTEST_F2P[2]}
    assert all(c.node_id in outcomes for c in canaries), (canaries, outcomes)
    assert [c.wrong(outcomes, resolved=True) for c in canaries] == [None] * len(canaries), outcomes


def test_results_equal_to_anything_or_every_string_are_caught(tmp_path):
    for name, lib in (("any", EQUAL_ANYTHING), ("str", EQUAL_EVERY_STR)):
        canaries, outcomes = _run(tmp_path / name, lib)
        assert all(outcomes.get(t) == "passed" for t in F2P), (name, outcomes)  # the task's tests are fooled
        wrong = [w for c in canaries if (w := c.wrong(outcomes, resolved=True))]
        kind = "fresh" if name == "any" else "perturbed"
        assert any(w.startswith(f"{kind} canary") for w in wrong), (name, wrong)


def test_names_are_new_every_time(tmp_path):
    names = []
    for i in range(2):
        tree = tmp_path / str(i)
        (tree / "tests").mkdir(parents=True)
        (tree / "tests" / "test_lib.py").write_text(TESTS)
        names.append({c.node_id for c in plant(tree, F2P)})
    assert not names[0] & names[1]


TABLE = "def shout(s):\n    return {'hi': 'HI!', 'a': 'A!', '': '!'}[s]\n"


def test_held_out_variants_expect_the_references_answer_and_fail_a_table(tmp_path):
    """featdel.grading.held_out: the reference's copies record what it computes with one input
    changed (not for test_in_context, whose assertion sits in a `with`); planted beside the tests, the held-out
    variant passes on an honest implementation and its perturbed copy fails; a table of the
    visible tests' answers passes every F2P test and fails every held-out variant."""
    from featdel.grading import held_out

    reference = tmp_path / "reference"
    (reference / "tests").mkdir(parents=True)
    (reference / "lib.py").write_text(LIB)
    (reference / "tests" / "test_lib.py").write_text(TESTS)
    found = held_out.capture(reference, F2P, reference)
    assert found is not None and sorted(e.nodes[0] for e, _ in found.by_key.values()) == [F2P[2], F2P[0]]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *found.ids], cwd=reference,
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(reference), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout[-2000:]
    values = found.values(reference, dict.fromkeys(found.ids, "passed"))
    assert sorted((e.nodes[0], list(rows)) for e, rows in values) == [(F2P[2], [""]), (F2P[0], [""])]
    assert all(isinstance(v, str) and v.endswith("!") for _, rows in values for v in rows.values())

    for lib, honest in ((LIB, True), (TABLE, False)):
        tree = tmp_path / ("honest" if honest else "table")
        canaries, outcomes = _run(tree, lib, held=values)
        held = [c for c in canaries if c.kind == "held_out"]
        assert sorted(c.original for c in held) == [F2P[2], F2P[0]]
        assert all(outcomes[t] == "passed" for t in F2P), outcomes
        # honest: every one passes; the table: not every one (the grade is unresolved). Not none:
        # an input changed at random can land on another visible test's (shout('') -> shout('a'))
        assert all(outcomes[c.node_id] == "passed" for c in held) is honest, outcomes
        assert all(outcomes[c.node_id] == "failed" for c in canaries if c.kind == "perturbed"), outcomes


WRAPPED = (
    "import pytest\nfrom lib import shout\n\n\n"
    "@pytest.mark.parametrize('word,out', [('hi', 'HI!'), ('yo', 'YO!')])\n"
    "def test_rows(word, out):\n    assert shout(word) == out\n"
)


def test_held_out_variants_change_a_parameter_at_run_time(tmp_path):
    """An input that is a name (here a parameter) is wrapped in a function that changes it at run
    time; each parameter set's answer is recorded and looked up under its parameters."""
    from featdel.grading import held_out

    f2p = ["tests/test_rows.py::test_rows[hi-HI!]", "tests/test_rows.py::test_rows[yo-YO!]"]
    trees = {}
    for name in ("reference", "graded"):
        trees[name] = tmp_path / name
        (trees[name] / "tests").mkdir(parents=True)
        (trees[name] / "lib.py").write_text(LIB)
        (trees[name] / "tests" / "test_rows.py").write_text(WRAPPED)
    found = held_out.capture(trees["reference"], f2p, trees["reference"])
    [(entry, _)] = found.by_key.values()
    assert entry.new is None  # wrapped: `shout(word)` has no literal
    env = {"PYTHONPATH": str(trees["reference"]), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *found.ids],
                          cwd=trees["reference"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stdout[-2000:]
    [(entry, rows)] = found.values(trees["reference"], dict.fromkeys(found.ids, "passed"))
    assert sorted(rows) == ["[hi-HI!]", "[yo-YO!]"] and all(v not in ("HI!", "YO!") for v in rows.values())
    planted = plant(trees["graded"], f2p, held=[(entry, rows)])
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "tests"],
                          cwd=trees["graded"], capture_output=True, text=True, timeout=120,
                          env={**env, "PYTHONPATH": str(trees["graded"])})
    passed = {line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith("PASSED ")}
    held = [c for c in planted if c.kind == "held_out"]
    assert sorted(c.original for c in held) == f2p, planted
    assert all(c.node_id in passed for c in held), done.stdout[-3000:]
    assert all(c.node_id not in passed for c in planted if c.kind == "perturbed"), done.stdout[-3000:]


def test_decoys_do_not_give_the_answer_away():
    """featdel.code.literals.decoys: among an answer and its decoys, nothing marks the answer. A
    number is not the centre of its decoys (its rank among them is uniform over many draws: decoys
    at answer +- k would leave it in the middle), a string's decoys change the position the
    answer would have been changed at, and a value with no like partner gets none."""
    import random
    from collections import Counter

    from featdel.code.literals import DECOYS, decoys

    rng = random.Random(7)
    ranks = Counter()
    for _ in range(4000):
        values = [50, *decoys(50, DECOYS, rng)]
        assert len(set(values)) == DECOYS + 1
        ranks[sorted(values).index(50)] += 1
    assert all(abs(n / 4000 - 1 / (DECOYS + 1)) < 0.03 for n in (ranks[r] for r in range(DECOYS + 1))), ranks
    words = ["hello", *decoys("hello", DECOYS, rng)]
    [at] = {i for w in words[1:] for i in range(5) if w[i] != "hello"[i]}
    assert all(w[:at] + w[at + 1:] == "hello"[:at] + "hello"[at + 1:] for w in words)
    assert decoys(True, DECOYS, rng) == [False] and decoys(None, DECOYS, rng) == decoys("", DECOYS, rng) == []
    assert all(type(d) is float for d in decoys(0.5, DECOYS, rng))

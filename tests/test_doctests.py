"""Doctests on a real mined library (pytest `--doctest-modules`): a doctest's examples and
expected output live in the source module the learner edits, so

- a doctest is never FAIL_TO_PASS (rewriting the docstring would pass it): a deletion only
  doctests notice is rejected at `tests`;
- a source module is not a test file for holding doctests: the grader carries the patch's edits
  to it (before, a P2P doctest in the module the gold patch restores made the gold unresolved).
"""

import pytest

from featdel.code.spans import is_doctest
from featdel.core.records import VerdictStatus
from tests.conftest import delete_and_verify, mine_tiny

DOCLIB = {
    "pyproject.toml": (
        '[project]\nname = "doclib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[tool.pytest.ini_options]\naddopts = "--doctest-modules"\n'
    ),
    "doclib/__init__.py": "from doclib.calc import double, halve, triple\n",
    "doclib/calc.py": (
        'def double(x):\n    """Twice x.\n\n    >>> double(2)\n    4\n    """\n    return x * 2\n\n\n'
        'def triple(x):\n    """Three times x.\n\n    >>> triple(2)\n    6\n    """\n    return x * 3\n\n\n'
        'def halve(x):\n    """Half of x; only its doctest checks it.\n\n    >>> halve(4)\n    2.0\n    """\n'
        '    return x / 2\n\n\n'
        # distinctive lines: the leak audit (before any test runs) needs one to search for
        'def half(x):\n    scaled_by_one_half = x * 0.5\n    return scaled_by_one_half\n\n\n'
        'def quarter(x):\n    """A quarter of x.\n\n    >>> quarter(8)\n    2.0\n    """\n    return half(half(x))\n'
    ),
    "tests/test_calc.py": (
        "from doclib import double, triple\n\n\n"
        # the exact type too: an object equal to anything (a stub variant) must not pass
        "def test_double():\n    assert (type(double(3)), double(3)) == (int, 6)\n\n\n"
        "def test_double_negative():\n    assert (type(double(-1)), double(-1)) == (int, -2)\n\n\n"
        "def test_triple():\n    assert (type(triple(3)), triple(3)) == (int, 9)\n"
    ),
}


def test_doctest_ids():
    assert is_doctest("doclib/calc.py::doclib.calc.double") and is_doctest("README.rst::README.rst")
    assert not is_doctest("tests/test_calc.py::test_double")
    assert not is_doctest("tests/test_calc.py::TestCalc::test_double[1.5-x.y]")


@pytest.fixture(scope="module")
def doclib(tmp_path_factory, featdel_cache, local_backend):
    """The doc library mined, its functions deleted and verified: (run dir, record, verdicts by target)."""
    run_dir, record = mine_tiny(tmp_path_factory, "doclib", DOCLIB, local_backend)
    verdicts = {v.target.split("::")[-1]: v for v in
                delete_and_verify(run_dir, local_backend, strategies=["function"], max_candidates=5, reruns=1)}
    return run_dir, record, verdicts


def test_doctests_are_never_the_reward_and_their_modules_stay_editable(doclib):
    from featdel.pipeline.context import RepoContext

    run_dir, record, verdicts = doclib
    assert "doclib/calc.py::doclib.calc.triple" in RepoContext.load(run_dir, record).passing
    double = verdicts["double"]
    assert double.status == VerdictStatus.VERIFIED, double.reason
    assert double.FAIL_TO_PASS == ["tests/test_calc.py::test_double", "tests/test_calc.py::test_double_negative"]
    assert "doclib/calc.py::doclib.calc.triple" in double.PASS_TO_PASS  # a doctest may still be P2P
    halve = verdicts["halve"]
    assert (halve.status, halve.stage) == (VerdictStatus.REJECTED, "tests"), halve.reason
    assert "only the deleted code's own doctests execute it" in halve.reason, halve.reason
    half = verdicts.get("half") or pytest.fail(str(sorted(verdicts)))  # only quarter's doctest notices: rewriting that docstring would pass it
    assert (half.status, half.stage) == (VerdictStatus.REJECTED, "tests"), half.reason
    assert "only doctests fail (1, e.g. doclib/calc.py::doclib.calc.quarter)" in half.reason


@pytest.mark.docker
@pytest.mark.slow
def test_the_exported_eval_script_resolves_gold_with_a_doctest_in_pass_to_pass(doclib, tmp_path):
    """The SWE-bench script (which Harbor's test.sh runs too) restores the files that hold tests,
    as the grader does: a source module holding a P2P doctest is not one, so the gold patch's
    edit to it stands (before, the script put the stub back and gold exited 1)."""
    import json
    import subprocess

    from featdel.code import trees
    from featdel.env import envbuild
    from featdel.interop import swebench
    from featdel.interop.materialize import materialize
    from featdel.pipeline.package import package
    from tests.conftest_sandbox import docker_base_image

    run_dir, _, verdicts = doclib
    assert "doclib/calc.py::doclib.calc.triple" in verdicts["double"].PASS_TO_PASS
    docker_base_image()  # skips without an engine (fails under CI=true)
    package(run_dir)
    swebench.export(run_dir, tmp_path / "rows.jsonl")
    [row] = [r for r in map(json.loads, (tmp_path / "rows.jsonl").read_text().splitlines())
             if r["instance_id"] == verdicts["double"].deletion_id]
    [built] = envbuild.build_all(run_dir, backend="docker")
    assert built.status in ("built", "reused"), built.reason
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval.sh").write_text(row["eval_script"])

    def verdict(tree):
        return subprocess.run(["docker", "run", "--rm", "--network", "none", "-v", f"{tree}:/testbed", "-v",
                               f"{tmp_path / 'eval'}:/eval:ro", row["env_image"], "bash", "/eval/eval.sh"],
                              capture_output=True, text=True, timeout=600)

    gold, start = tmp_path / "gold", tmp_path / "start"
    materialize(run_dir, row["instance_id"], gold)
    trees.apply_patch(gold, row["patch"])
    done = verdict(gold)
    assert done.returncode == 0 and "RESOLVED" in done.stdout, done.stdout[-2000:] + done.stderr[-1000:]
    materialize(run_dir, row["instance_id"], start)
    assert verdict(start).returncode == 1
    # SWE-bench's own harness, in the start-state image: gold resolves, the start state does not.
    from featdel.core.shards import env_rows, task_rows
    from featdel.env import taskimage
    from tests.swebench_run import predictions, run_harness

    task = next(t for t in task_rows(run_dir) if t.instance_id == row["instance_id"])
    [env] = [e for e in env_rows(run_dir) if e.env_id == task.env_id]
    taskimage.build(task, env)
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(row) + "\n")
    wrong = "diff --git a/NOTE b/NOTE\nnew file mode 100644\n--- /dev/null\n+++ b/NOTE\n@@ -0,0 +1 @@\n+x\n"
    for model, patch, expected in (("gold", row["patch"], [row["instance_id"]]), ("wrong", wrong, [])):
        report = run_harness(data, predictions([row], model, lambda r, p=patch: p), tmp_path / "harness", f"d-{model}")
        assert report["resolved_ids"] == expected and not report["error_ids"], report

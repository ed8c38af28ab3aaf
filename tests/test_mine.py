"""Mining pins sources, records a three-run baseline with flaky tests set apart, maps which
tests execute which symbol, rejects repos that miss a threshold with a reason, keeps going past
bad sources, and resumes without redoing finished repositories. A test module that cannot be
collected is recorded with its error and left out (`--ignore` in the env's test command) while
the rest of the suite runs; one that misses a module gets the repo's declared extras first."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from featdel.core.errors import CorpusError, SourceError
from featdel.core.records import RepoStatus
from featdel.env.corpus import CorpusEntry, load
from featdel.env.recipe import Overrides, detect, import_roots
from featdel.env.sources import resolve
from featdel.pipeline.mine import Thresholds, mine
from tests.conftest import make_repo

LOW = Thresholds(min_passing=3, min_coverage=10.0)


def entry(source) -> CorpusEntry:
    return CorpusEntry(source=str(source), overrides=Overrides())


@pytest.fixture(scope="module")
def mined(tiny_repo, tmp_path_factory, local_backend):
    run_dir = tmp_path_factory.mktemp("run")
    records = mine([entry(tiny_repo)], run_dir, backend=local_backend, thresholds=LOW)
    return run_dir, records[0]


def test_local_repo_is_pinned_to_its_head(tiny_repo):
    pinned = resolve(str(tiny_repo))
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tiny_repo, capture_output=True, text=True).stdout
    assert pinned.commit == head.strip()


def test_git_url_with_rev_pins_that_commit(tiny_repo, tmp_path):
    first = resolve(str(tiny_repo)).commit
    clone = tmp_path / "upstream"
    subprocess.run(["git", "clone", "-q", str(tiny_repo), str(clone)], check=True)
    (clone / "NEW").write_text("x")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x"], cwd=clone)
    subprocess.run(["git", "add", "NEW"], cwd=clone, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "new"], cwd=clone, check=True)
    pinned = resolve(f"file://{clone}@{first[:10]}")
    assert pinned.commit == first


@pytest.mark.parametrize(
    "spec, message",
    [("/no/such/dir", "no such directory"), ("pypi:nothing", "pypi:NAME==VERSION"), ("__tmp__", "not a git repository")],
)
def test_bad_sources_say_what_to_do(spec, message, tmp_path):
    spec = str(tmp_path) if spec == "__tmp__" else spec
    with pytest.raises(SourceError, match=message):
        resolve(spec)


def test_recipe_reads_declared_test_dependencies(tmp_path):
    tree = make_repo(tmp_path / "r", {
        "pyproject.toml": '[project]\nname="x"\nversion="1"\n[project.optional-dependencies]\ntests=["hypothesis"]\ndocs=["sphinx"]\n',
        "requirements-test.txt": "freezegun\n",
        "src/x/__init__.py": "",
        "tests/test_x.py": "",
    }, commit=False)
    recipe = detect(tree)
    assert ["python", "-m", "pip", "install", "-q", "-e", ".[tests]"] in recipe.install
    assert any("requirements-test.txt" in argv for argv in recipe.install)
    assert recipe.package_dirs == ["src/x"] == import_roots(tree)


def test_corpus_rejects_unknown_keys(tmp_path):
    bad = tmp_path / "c.toml"
    bad.write_text('[[repo]]\nsource = "pypi:a==1"\nextra = ["x"]\n')
    with pytest.raises(CorpusError, match="unknown key `extra`"):
        load(bad)
    good = tmp_path / "g.toml"
    good.write_text('[[repo]]\nsource = "pypi:a==1"\nextras = ["test"]\ntimeout_s = 60\n')
    assert load(good)[0].overrides == Overrides(extras=["test"], timeout_s=60.0)


def test_baseline_counts_and_flaky_tests(mined):
    run_dir, record = mined
    assert record.status == RepoStatus.MINED, record.reason
    assert (record.collected, record.passed, record.skipped, record.flaky) == (7, 5, 1, 1)
    baseline = json.loads((run_dir / "repos" / record.name / "baseline.json").read_text())
    assert baseline["tests"]["tests/test_calc.py::test_flaky"]["outcomes"] == ["passed", "failed", "passed"]
    assert baseline["tests"]["tests/test_calc.py::test_flaky"]["flaky"] is True


def test_mining_records_each_phase_it_enters(mined):
    """A long mine leaves a record of where it is: progress.jsonl names every phase as it starts."""
    run_dir, record = mined
    lines = [json.loads(ln) for ln in (run_dir / "progress.jsonl").read_text().splitlines()]
    steps = [ln["step"] for ln in lines if ln["item"] == record.source]
    assert steps[:2] == ["pin", "install"]
    assert [s for s in steps if s.startswith("baseline")] == ["baseline 1/3 (with coverage)", "baseline 2/3",
                                                              "baseline 3/3"]
    assert steps[-2:] == ["coverage map", "done"] and all(ln["stage"] == "mine" and ln["at"] for ln in lines)


def test_coverage_map_names_the_tests_of_each_symbol(mined):
    run_dir, record = mined
    cmap = json.loads((run_dir / "repos" / record.name / "coverage.json").read_text())
    tests = {s["qualname"]: s["tests"] for s in cmap["symbols"]}
    assert tests["shout"] == ["tests/test_text.py::test_shout"]
    assert tests["_exclaim"] == ["tests/test_text.py::test_shout"]
    assert tests["unused"] == []
    assert tests["Calc.double"] == ["tests/test_calc.py::test_chain", "tests/test_calc.py::test_double"]
    # The flaky test executes Calc.__init__ but is never a reward.
    assert "tests/test_calc.py::test_flaky" not in tests["Calc.__init__"]
    assert set(tests["Calc"]) >= set(tests["Calc.add"]) | set(tests["Calc.double"])
    assert 50 < cmap["line_rate"] <= 100


def test_thresholds_reject_with_a_reason(tiny_repo, tmp_path, local_backend):
    strict = Thresholds(min_passing=50)
    [record] = mine([entry(tiny_repo)], tmp_path, backend=local_backend, thresholds=strict)
    assert record.status == RepoStatus.REJECTED
    assert record.reason == "only 5 passing tests (minimum 50)"


def test_bad_repo_becomes_a_record_and_the_batch_goes_on(tiny_repo, tmp_path, local_backend):
    no_tests = make_repo(tmp_path / "notests", {"pkg/__init__.py": "X = 1\n", "setup.py": "import setuptools; setuptools.setup(name='pkg')\n"})
    records = mine([entry("/missing/repo"), entry(no_tests), entry(tiny_repo)], tmp_path / "run",
                   backend=local_backend, thresholds=LOW)
    by_source = {r.source: r for r in records}
    assert by_source["/missing/repo"].status == RepoStatus.BROKEN
    assert "no such directory" in by_source["/missing/repo"].reason
    assert by_source[str(no_tests)].status == RepoStatus.REJECTED
    assert by_source[str(no_tests)].reason == "no tests collected: the tree has no test files (an sdist or npm tarball without its tests?)"
    assert by_source[str(tiny_repo)].status == RepoStatus.MINED


def test_second_run_resumes(tiny_repo, tmp_path, local_backend):
    steps = []
    mine([entry(tiny_repo)], tmp_path, backend=local_backend, thresholds=LOW)
    records = mine([entry(tiny_repo)], tmp_path, backend=local_backend, thresholds=LOW,
                   on_step=lambda source, step: steps.append(step))
    assert steps == ["resumed"]  # nothing redone
    assert records[0].status == RepoStatus.MINED
    assert len((tmp_path / "repos.jsonl").read_text().splitlines()) == 1


def test_old_conftest_falls_back_to_an_older_pytest(tmp_path, local_backend, featdel_cache):
    from tests.conftest import TINY_LIB

    files = {**TINY_LIB, "tests/conftest.py": "def pytest_ignore_collect(path, config):\n    return None\n"}
    repo = make_repo(tmp_path / "oldconftest", files)
    [record] = mine([entry(repo)], tmp_path / "run", backend=local_backend, thresholds=LOW)
    assert record.status == RepoStatus.MINED, record.reason
    assert "pytest<8" in record.recipe.install[-1]


def test_uncollectable_modules_are_left_out_and_a_missing_module_tries_the_extras(tmp_path, local_backend,
                                                                                  featdel_cache):
    from featdel.env.envs import load
    from tests.conftest import TINY_LIB

    pyproject = TINY_LIB["pyproject.toml"].replace(
        "[build-system]", '[project.optional-dependencies]\nfancy = ["six"]\n[build-system]')
    files = {**TINY_LIB, "pyproject.toml": pyproject,
             # an optional feature's tests: they need the `fancy` extra, which is not a test extra
             "tests/test_fancy.py": "import six\n\n\ndef test_six():\n    assert six.PY3\n",
             # a module no install can fix
             "tests/test_broken.py": "raise RuntimeError('this module is broken')\n\n\ndef test_never():\n    pass\n"}
    repo = make_repo(tmp_path / "optional", files)
    steps = []
    [record] = mine([entry(repo)], tmp_path / "run", backend=local_backend, thresholds=LOW,
                    on_step=lambda source, step: steps.append(step))
    assert record.status == RepoStatus.MINED, record.reason
    assert "install (all extras)" in steps
    assert ["python", "-m", "pip", "install", "-q", "-e", ".[fancy]"] in record.recipe.install
    assert record.passed == 6  # the five of TINY_LIB and the extra's test; the broken module left out
    assert record.left_out == ["tests/test_broken.py: RuntimeError: this module is broken"]
    # Verification and grading load the env's marker: the module stays out there too.
    assert "--ignore=tests/test_broken.py" in record.recipe.test_cmd
    assert load(Path(record.env_dir)).recipe.test_cmd == record.recipe.test_cmd


def test_a_rejection_names_the_modules_that_could_not_be_collected(tmp_path, local_backend, featdel_cache):
    files = {"pkg/__init__.py": "X = 1\n", "setup.py": "import setuptools; setuptools.setup(name='pkg')\n",
             "tests/test_x.py": "import not_a_module_anywhere\n\n\ndef test_x():\n    pass\n"}
    repo = make_repo(tmp_path / "missing", files)
    [record] = mine([entry(repo)], tmp_path / "run", backend=local_backend, thresholds=LOW)
    assert record.status == RepoStatus.REJECTED
    assert record.reason == ("no tests collected: 1 test modules could not be collected, e.g. tests/test_x.py: "
                             "ModuleNotFoundError: No module named 'not_a_module_anywhere'; "
                             "the repo declares no other extras")


def test_first_error_names_the_error_line_not_nodes_version_line():
    from featdel.pipeline.mine import first_error

    loader = ("node:internal/modules/cjs/loader:1228\n  throw err;\n  ^\n\nError: Cannot find module '../dist/index.cjs'\n"
              "Require stack:\n- /src/lib/index.cjs\n\nNode.js v20.20.2\n")
    assert first_error(loader) == "Error: Cannot find module '../dist/index.cjs'"
    assert first_error("/src/t.js:3\nfoo bar\n    ^^^\n\nSyntaxError: Unexpected identifier\n\nNode.js v20.20.2") == (
        "SyntaxError: Unexpected identifier")
    assert first_error("TypeError: x is not a function\n    at Object.<anonymous> (/src/t.js:1:1)\n\nNode.js v20.20.2") == (
        "TypeError: x is not a function")
    assert first_error("ImportError while importing test module\nE   ModuleNotFoundError: No module named 'x'\n") == (
        "ModuleNotFoundError: No module named 'x'")  # pytest's last E line, as before
    assert first_error("") == "no message"

"""Shared fixtures: tiny git repositories built in tmp dirs, and an isolated featdel cache.

Environment builds cost seconds (a venv and a pip install), so the tiny repository used by the
pipeline tests is built once per session and shared; tests that modify a tree work on copies.
"""

from __future__ import annotations

import functools
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# uv's download and wheel cache, shared by every test's featdel cache and both workers (uv locks
# it): without this each test cache fetches pytest and coverage again (featdel.env.tools.uv_environ)
os.environ.setdefault("UV_CACHE_DIR", os.path.join(tempfile.gettempdir(), "featdel-tests-uv-cache"))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test` runs two pytest-xdist workers: each file runs whole on one worker (its module
    fixtures are built once), and every file with a test marked `docker` runs on the same worker,
    because the SWE-bench harness lists all of the engine's containers and inspects each, so a
    container that the other worker removes in between fails it. (`--dist loadgroup` would say
    this with marks, but pytest-xdist 3.8 renames node ids that pytest 9.2 no longer reads.)"""
    from xdist.scheduler import LoadScopeScheduling

    root = Path(str(config.rootpath))

    class DockerFilesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            return "docker" if _marks_docker(root / path) else path

    return DockerFilesTogether(config, log)


@functools.cache
def _marks_docker(path: Path) -> bool:
    return path.suffix == ".py" and "mark.docker" in path.read_text()


def hand_made_env(root: Path, tests: dict[str, str]):
    """An env made by hand under `root`: this interpreter's venv (it has pytest) and a
    one-module checkout (`mod.py`, VALUE = 1) with `tests` (name -> text) in its tests/ folder."""
    import sys

    from featdel.core.records import Recipe
    from featdel.env.envs import Env

    (root / "src" / "tests").mkdir(parents=True)
    (root / "venv").symlink_to(sys.prefix)
    (root / "src" / "mod.py").write_text("VALUE = 1\n")
    for name, text in tests.items():
        (root / "src" / "tests" / name).write_text(text)
    return Env(root=root, recipe=Recipe(python="3", install=[], package_dirs=["mod.py"],
                                        test_cmd=["python", "-m", "pytest", "-q", "-p", "no:cacheprovider"]))


def make_repo(root: Path, files: dict[str, str], *, commit: bool = True) -> Path:
    """Write `files` under `root` and commit them as one git commit."""
    root.mkdir(parents=True, exist_ok=True)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    if commit:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
               "GIT_COMMITTER_EMAIL": "t@t"}
        for argv in (["git", "init", "-q", "-b", "main"], ["git", "add", "-A"], ["git", "commit", "-qm", "base"]):
            subprocess.run(argv, cwd=root, env=env, check=True, capture_output=True)
    return root


def assert_tasks_round_trip(run_dir: Path, backend, tmp_path: Path) -> int:
    """From the shards alone, for every task: the start state fails every F2P test, and with
    `patch` applied every F2P and P2P test passes. Returns how many tasks were checked."""
    from featdel.code.trees import apply_patch, start_state
    from featdel.core.shards import read_envs, read_tasks
    from featdel.env.envs import load
    from featdel.env.sources import cache_root
    from featdel.env.testrun import RunOptions, run_suite

    tmp_path.mkdir(parents=True, exist_ok=True)
    envs = {row["env_id"]: row for row in read_envs(run_dir).to_pylist()}
    tasks = read_tasks(run_dir).to_pylist()
    assert tasks, f"no tasks in {run_dir}"
    for task in tasks:
        snapshot = tmp_path / f"{task['env_id']}.tar.gz"
        snapshot.write_bytes(envs[task["env_id"]]["snapshot"])
        env = load(cache_root() / "envs" / task["env_id"])
        start = start_state(snapshot, task["deletion_patch"], tmp_path / task["instance_id"])
        f2p, p2p = task["FAIL_TO_PASS"], task["PASS_TO_PASS"]
        before = run_suite(env, backend, RunOptions(tests=f2p), tree=start)
        assert before.broken is None, before.broken
        assert not before.passed() & set(f2p), task["instance_id"]
        apply_patch(start, task["patch"])
        after = run_suite(env, backend, RunOptions(tests=f2p + p2p), tree=start)
        assert after.passed() == set(f2p + p2p), task["instance_id"]
    return len(tasks)


def mine_tiny(tmp_path_factory, name: str, files: dict[str, str], backend):
    """Build a tiny repository from `files`, mine it into a fresh run dir (thresholds low enough
    for a handful of tests) and return (run_dir, its mined record)."""
    from featdel.core.records import RepoStatus
    from featdel.env.corpus import CorpusEntry
    from featdel.env.recipe import Overrides
    from featdel.pipeline.mine import Thresholds, mine

    repo = make_repo(tmp_path_factory.mktemp(f"{name}-repo") / name, files)
    run_dir = tmp_path_factory.mktemp(f"{name}-run")
    [record] = mine([CorpusEntry(source=str(repo), overrides=Overrides())], run_dir, backend=backend,
                    thresholds=Thresholds(min_passing=3, min_coverage=10.0))
    assert record.status == RepoStatus.MINED, record.reason
    return run_dir, record


def delete_and_verify(run_dir: Path, backend, *, strategies: list[str], max_candidates: int, reruns: int):
    """The delete and verify stages on a mined run dir; returns every verdict."""
    from featdel.pipeline.context import RepoContext, make_check
    from featdel.pipeline.delete import delete_all
    from featdel.pipeline.verify import VerifyOptions, verify_all

    delete_all(run_dir, strategies=strategies, max_candidates=max_candidates, seed=0, keep_docstrings=True,
               check_for=lambda r: make_check(RepoContext.load(run_dir, r), backend))
    return verify_all(run_dir, backend, VerifyOptions(reruns=reruns))


TINY_LIB = {
    "pyproject.toml": (
        '[project]\nname = "tinylib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "tinylib/__init__.py": "from tinylib.text import shout, whisper\nfrom tinylib.calc import Calc\n",
    "tinylib/text.py": (
        "def _exclaim(s):\n    return s + '!'\n\n\n"
        "def shout(s):\n    \"\"\"Upper-case and exclaim.\"\"\"\n    return _exclaim(s.upper())\n\n\n"
        "def whisper(s):\n    return s.lower()\n\n\n"
        "def unused(s):\n    return s * 2\n"
    ),
    "tinylib/calc.py": (
        "class Calc:\n"
        "    def __init__(self, start=0):\n        self.value = start\n\n"
        "    def add(self, n):\n        self.value += n\n        return self\n\n"
        "    def double(self):\n        self.value *= 2\n        return self\n"
    ),
    "tests/test_text.py": (
        "from tinylib import shout, whisper\n\n\n"
        # the exact type too: an object equal to anything (a stub variant) must not pass
        "def test_shout():\n    out = shout('hi')\n    assert (type(out), out) == (str, 'HI!')\n\n\n"
        "def test_whisper():\n    out = whisper('HI')\n    assert (type(out), out) == (str, 'hi')\n\n\n"
        "def test_skipped():\n    import pytest\n    pytest.skip('not today')\n"
    ),
    "tests/test_calc.py": (
        "import pathlib\nfrom tinylib import Calc\n\n\n"
        "def test_add():\n    assert Calc(1).add(2).value == 3\n\n\n"
        "def test_double():\n    assert Calc(3).double().value == 6\n\n\n"
        "def test_chain():\n    assert Calc().add(2).double().value == 4\n\n\n"
        "def test_flaky():\n"
        "    marker = pathlib.Path(__file__).with_name('.runs')\n"
        "    n = int(marker.read_text()) if marker.exists() else 0\n"
        "    marker.write_text(str(n + 1))\n"
        "    assert n % 2 == 0\n"
    ),
}


@pytest.fixture(scope="session")
def featdel_cache(tmp_path_factory) -> Path:
    """One featdel cache for the session, so environments are built once."""
    cache = tmp_path_factory.mktemp("featdel-cache")
    os.environ["FEATDEL_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def tiny_repo(tmp_path_factory, featdel_cache) -> Path:
    return make_repo(tmp_path_factory.mktemp("tiny") / "tinylib", TINY_LIB)


@pytest.fixture(scope="session")
def local_backend():
    from featdel.sandboxes import get_backend

    return get_backend("local")


@pytest.fixture(scope="session")
def packaged_tiny(tmp_path_factory, featdel_cache, local_backend) -> Path:
    """A packaged run of the tiny library (body deletions only, a few tasks): for the tests of
    what consumes shards (env build, exports, publish). Built once per session."""
    from featdel.pipeline.package import package

    run_dir, _ = mine_tiny(tmp_path_factory, "tinylib", TINY_LIB, local_backend)
    delete_and_verify(run_dir, local_backend, strategies=["body"], max_candidates=3, reruns=2)
    tasks, _ = package(run_dir)
    assert tasks, "no verified task in the tiny run"
    return run_dir


# --- JavaScript/TypeScript: the two projects of tests/js_projects.py, packaged once per session ---

@pytest.fixture(scope="session")
def js_backend():
    """The local sandbox, for tests that need node and npm besides (skipped without them)."""
    import shutil

    from featdel.sandboxes.local import LocalBackend

    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("needs node and npm")
    backend = LocalBackend()
    if reason := backend.unavailable():
        pytest.skip(reason)
    return backend


@pytest.fixture(scope="session")
def mocha_run(tmp_path_factory, featdel_cache, js_backend):
    """(run dir, record, verdicts, tasks, steps) of the mocha project (body stubs)."""
    from js_projects import MOCHA, made

    return made(tmp_path_factory, "jsmath", MOCHA, js_backend, ["body"], 8)


@pytest.fixture(scope="session")
def ts_run(tmp_path_factory, featdel_cache, js_backend):
    """(run dir, record, verdicts, tasks, steps) of the TypeScript project (whole functions, vitest)."""
    from js_projects import TYPESCRIPT, made

    return made(tmp_path_factory, "tsmath", TYPESCRIPT, js_backend, ["function"], 4)


# --- The real pretrained model (tests/model_server.py): converted and served once per session ---

@pytest.fixture(scope="session")
def smollm2(tmp_path_factory) -> Path:
    """The named model's checkpoint folder, converted by `featdel model fetch` for this session."""
    from model_server import converted, need_model_packages

    need_model_packages()
    return converted(tmp_path_factory.mktemp("featdel-models"))


@pytest.fixture(scope="session")
def smollm2_server(smollm2, tmp_path_factory):
    """(base URL, model name) of `transformers serve` on the converted model, stopped after the session."""
    from model_server import served

    with served(smollm2, tmp_path_factory.mktemp("serve") / "serve.log") as where:
        yield where

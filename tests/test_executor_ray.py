"""Mining and verification on a real local Ray cluster (featdel.pipeline.executor_ray).

Pins: Ray's verdicts equal the local executor's on the same candidates (status, stage, F2P,
P2P); a candidate whose worker is killed mid-verification is retried and its verdict written
once; a Ray run interrupted in the driver resumes without redoing or rewriting a verdict; a
repository mined on Ray gives the local executor's record and the driver writes its files;
candidates are pinned to nodes holding their repository's environment (and, with docker, its
image); without Ray installed, `--executor ray` is a one-line error naming the extra.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from featdel.core.errors import FeatdelError
from featdel.core.records import VerdictStatus
from featdel.core.rundir import RunDir
from featdel.pipeline.executor import LocalExecutor, get_executor
from featdel.pipeline.verify import VerifyOptions, verify_all
from tests.conftest import TINY_LIB, mine_tiny
from tests.conftest_sandbox import docker_base_image, need
from tests.ray_faults import PLAN_VAR

try:
    import ray
except ImportError:  # the cluster fixture skips, or fails under CI=true (make test installs the extra)
    ray = None

OPTS = VerifyOptions(reruns=1)
# A body a stub (`return None`) is as good as: the candidate that verification must reject.
RAYLIB = {
    **TINY_LIB,
    "tinylib/box.py": "def clear(d):\n    \"\"\"Empty `d` in place.\"\"\"\n    d.clear()\n    d.update({})\n    return None\n",
    "tests/test_box.py": "from tinylib.box import clear\n\n\ndef test_clear_returns_none():\n    assert clear({1: 2}) is None\n",
}


@pytest.fixture(scope="module")
def cluster(featdel_cache, tmp_path_factory):
    """One local Ray cluster for the module, started after FEATDEL_CACHE is set so that its
    workers share the session's environments. Its workers run `tests.ray_faults.install` at
    start, so a test can have a worker die (`die_once`)."""
    need(ray is not None, "the ray extra is not installed: pip install 'featdel[ray]'")
    plan = tmp_path_factory.mktemp("ray-faults") / "plan"
    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning",
             runtime_env={"worker_process_setup_hook": "tests.ray_faults.install",
                          "env_vars": {PLAN_VAR: str(plan), "PYTHONPATH": path}})
    yield plan
    ray.shutdown()


@pytest.fixture(scope="module")
def deleted(tmp_path_factory, featdel_cache, local_backend) -> Path:
    """A mined tiny repository with a few candidates (some verify, some do not), no verdicts."""
    from featdel.pipeline.context import RepoContext, make_check
    from featdel.pipeline.delete import delete_all

    run_dir, _ = mine_tiny(tmp_path_factory, "raylib", RAYLIB, local_backend)
    delete_all(run_dir, strategies=["body"], max_candidates=2, seed=0, keep_docstrings=True,
               check_for=lambda r: make_check(RepoContext.load(run_dir, r), local_backend))
    return run_dir


def copy_run(src: Path, dest: Path, keep: list[str] | None = None) -> Path:
    shutil.copytree(src, dest)
    if keep is not None:  # only these deletions
        rd = RunDir(dest)
        lines = [ln for ln in rd.deletions_jsonl.read_text().splitlines() if json.loads(ln)["deletion_id"] in keep]
        rd.deletions_jsonl.write_text("\n".join(lines) + "\n")
    return dest


def summary(verdicts) -> dict:
    return {v.deletion_id: (v.status, v.stage, v.FAIL_TO_PASS, v.PASS_TO_PASS) for v in verdicts}


@pytest.fixture(scope="module")
def local_verdicts(deleted, tmp_path_factory, local_backend) -> dict:
    verdicts = verify_all(copy_run(deleted, tmp_path_factory.mktemp("local") / "run"), local_backend, OPTS)
    statuses = {v.status for v in verdicts}
    assert VerdictStatus.VERIFIED in statuses and VerdictStatus.REJECTED in statuses, summary(verdicts)
    return summary(verdicts)


def written_ids(run_dir: Path) -> list[str]:
    return [json.loads(ln)["deletion_id"] for ln in RunDir(run_dir).verdicts_jsonl.read_text().splitlines()]


def test_ray_verdicts_equal_local(cluster, deleted, local_verdicts, local_backend, tmp_path):
    run_dir = copy_run(deleted, tmp_path / "run")
    verdicts = verify_all(run_dir, local_backend, OPTS, executor=get_executor("ray"))
    assert summary(verdicts) == local_verdicts
    assert sorted(written_ids(run_dir)) == sorted(local_verdicts)


def test_killed_worker_is_retried_and_written_once(cluster, deleted, local_verdicts, local_backend, tmp_path):
    victim = next(i for i, v in local_verdicts.items() if v[0] == VerdictStatus.VERIFIED)
    run_dir = copy_run(deleted, tmp_path / "run", keep=[victim])
    marker = tmp_path / "died.pid"
    cluster.write_text(f"{victim}={marker}")
    try:
        verdicts = verify_all(run_dir, local_backend, OPTS, executor=get_executor("ray"))
    finally:
        cluster.unlink()
    assert int(marker.read_text()) != os.getpid()  # the first try ran in a worker and killed it ...
    assert summary(verdicts) == {victim: local_verdicts[victim]}  # ... and the retry's verdict counts
    assert written_ids(run_dir) == [victim]


def test_interrupted_ray_run_resumes_without_rewriting(cluster, deleted, local_verdicts, local_backend, tmp_path):
    run_dir = copy_run(deleted, tmp_path / "run")

    def stop_after_first(item: str, step: str) -> None:
        if step == "done":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        verify_all(run_dir, local_backend, OPTS, executor=get_executor("ray"), on_step=stop_after_first)
    first = RunDir(run_dir).verdicts_jsonl.read_text()
    assert len(first.splitlines()) == 1
    steps = []
    verdicts = verify_all(run_dir, local_backend, OPTS, executor=get_executor("ray"),
                          on_step=lambda item, step: steps.append((item, step)))
    assert RunDir(run_dir).verdicts_jsonl.read_text().startswith(first)  # kept, not redone
    assert (json.loads(first)["deletion_id"], "resumed") in steps
    assert sorted(written_ids(run_dir)) == sorted(local_verdicts)  # each once
    assert summary(verdicts) == local_verdicts


def test_mining_on_ray_matches_local(cluster, deleted, local_backend, tmp_path):
    from featdel.env.corpus import CorpusEntry
    from featdel.env.recipe import Overrides
    from featdel.pipeline.mine import Thresholds, mine

    [local] = RunDir(deleted).latest_repos().values()
    entry = CorpusEntry(source=local.source, overrides=Overrides())
    [record] = mine([entry], tmp_path / "run", backend=local_backend, executor=get_executor("ray"),
                    thresholds=Thresholds(min_passing=3, min_coverage=10.0))
    keep = ("status", "name", "commit", "collected", "passed", "failed", "env_dir", "recipe")
    assert {k: getattr(record, k) for k in keep} == {k: getattr(local, k) for k in keep}
    ours, theirs = RunDir(tmp_path / "run"), RunDir(deleted)  # written by the driver, not left in a scratch dir
    for path in (ours.snapshot, ours.baseline, ours.coverage):
        assert path(record.name).stat().st_size > 0
    assert ours.coverage(record.name).read_text() == theirs.coverage(record.name).read_text()
    tests = json.loads(ours.baseline(record.name).read_text())["tests"]
    assert sorted(tests) == sorted(json.loads(theirs.baseline(record.name).read_text())["tests"])


def test_candidates_go_to_nodes_that_hold_their_environment(cluster, deleted):
    from dataclasses import replace

    from featdel.pipeline.executor_ray import RayExecutor

    [record] = RunDir(deleted).latest_repos().values()
    gone = replace(record, name="gone", env_dir=str(deleted / "no-such-env"))
    homes = RayExecutor()._homes({record.name: record, "gone": gone}, docker=False)
    assert set(homes) == {record.name}  # a repository no node holds is not pinned anywhere
    assert next(homes[record.name]).node_id == ray.get_runtime_context().get_node_id()


@pytest.mark.docker
def test_with_docker_a_node_holds_a_repository_only_with_its_image(deleted):
    from featdel.pipeline.executor_ray import homes_task

    [record] = RunDir(deleted).latest_repos().values()
    wants = {"imaged": (record.env_dir, docker_base_image()), "unimaged": (record.env_dir, "featdel-no-such:0")}
    assert homes_task(wants, docker=True) == ["imaged"]
    assert homes_task(wants, docker=False) == ["imaged", "unimaged"]


def test_no_ray_is_a_one_line_error(monkeypatch):
    monkeypatch.setitem(os.sys.modules, "ray", None)  # `import ray` now raises ImportError
    with pytest.raises(FeatdelError, match=r"pip install 'featdel\[ray\]'"):
        get_executor("ray")
    with pytest.raises(FeatdelError, match="--executor ray"):
        get_executor("local", address="ray://head:10001")
    assert isinstance(get_executor("local", jobs=2), LocalExecutor)


def test_cli_verify_joins_a_cluster_by_address(cluster, deleted, local_verdicts, tmp_path):
    import subprocess
    import sys

    rejected = next(i for i, v in local_verdicts.items() if v[0] == VerdictStatus.REJECTED)
    run_dir = copy_run(deleted, tmp_path / "run", keep=[rejected])
    address = ray.get_runtime_context().gcs_address
    featdel = Path(sys.executable).with_name("featdel")
    out = subprocess.run([str(featdel), "verify", str(run_dir), "--reruns", "1", "--executor", "ray", "--address",
                          address], check=False, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert summary(RunDir(run_dir).verdicts()) == {rejected: local_verdicts[rejected]}

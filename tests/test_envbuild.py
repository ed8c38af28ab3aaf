"""Environments travel with the shards.

Pins: with only `tasks/` and `envs/` of a packaged run copied to a new folder and a new, empty
featdel cache, `featdel env build` rebuilds every environment from the env rows alone, and
`featdel.grading.evaluate` then resolves every gold patch and no empty one: on the local backend (env
in the cache) and on docker (an image `featdel-env:<env_id>` whose venv sits at
/opt/featdel/venv, whose /testbed is empty, and that holds no path of the host). A second build
reuses what the first made; an unknown env id is a one-line error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from featdel.core.records import read_jsonl
from featdel.core.shards import read_tasks
from featdel.env import envbuild
from featdel.grading.evaluate import evaluate
from tests.conftest_sandbox import docker_base_image


def ship(run_dir: Path, dest: Path) -> Path:
    """What a consumer gets: the shards and nothing else of the run."""
    for part in ("tasks", "envs"):
        shutil.copytree(run_dir / part, dest / part)
    return dest


def gold_and_empty(run_dir: Path, path: Path) -> Path:
    rows = read_tasks(run_dir).to_pylist()
    lines = [json.dumps({"instance_id": r["instance_id"], "model_patch": patch, "model_name_or_path": model})
             for r in rows for model, patch in (("gold", r["patch"]), ("empty", ""))]
    path.write_text("\n".join(lines) + "\n")
    return path


def assert_gold_only(results) -> None:
    by_model: dict[str, set[str]] = {}
    for r in results:
        by_model.setdefault(r.model_name_or_path, set()).add(r.status)
    assert by_model == {"gold": {"resolved"}, "empty": {"unresolved"}}, [(r.model_name_or_path, r.status, r.reason)
                                                                         for r in results]


@pytest.fixture()
def empty_cache(tmp_path):
    """A second machine's cache: nothing built, nothing downloaded."""
    before = os.environ.get("FEATDEL_CACHE")
    os.environ["FEATDEL_CACHE"] = str(tmp_path / "cache")
    yield tmp_path / "cache"
    if before is None:
        os.environ.pop("FEATDEL_CACHE", None)
    else:
        os.environ["FEATDEL_CACHE"] = before


def test_local_rebuild_from_shards_grades_gold_and_not_empty(packaged_tiny, empty_cache, tmp_path, local_backend):
    shipped = ship(packaged_tiny, tmp_path / "shipped")
    done = subprocess.run([sys.executable, "-m", "featdel.cli.main", "evaluate", str(shipped), "--predictions",
                           str(gold_and_empty(shipped, tmp_path / "p.jsonl")), "--out", str(tmp_path / "r0.jsonl")],
                          capture_output=True, text=True, timeout=300, env=os.environ)
    assert "featdel env build" in (tmp_path / "r0.jsonl").read_text()  # not built here yet: says how
    built = envbuild.build_all(shipped, backend="local")
    assert [b.status for b in built] == ["built"], built
    assert Path(built[0].where).is_relative_to(empty_cache) and not Path(built[0].where).is_symlink()
    site = next((Path(built[0].where) / "venv").glob("lib/python*/site-packages"))
    assert not list(site.glob("pip*")) and not list(site.glob("setuptools*")), "the lock names no install tool"
    results = evaluate(shipped, tmp_path / "p.jsonl", tmp_path / "r.jsonl", local_backend)
    assert_gold_only(results)
    assert [b.status for b in envbuild.build_all(shipped, backend="local")] == ["reused"]
    assert done.returncode == 0


def test_only_names_an_env(packaged_tiny, empty_cache, tmp_path):
    from featdel.core.errors import RunDirError

    with pytest.raises(RunDirError, match="no environment nope"):
        envbuild.build_all(packaged_tiny, only="nope")


@pytest.mark.docker
@pytest.mark.slow
def test_docker_image_from_shards_grades_gold_and_not_empty(packaged_tiny, empty_cache, tmp_path):
    docker_base_image()  # skips without an engine (fails under CI=true)
    from featdel.sandboxes import get_backend, images

    shipped = ship(packaged_tiny, tmp_path / "shipped")
    [row] = envbuild.read_rows(shipped)
    name = envbuild.image_tag(row.env_id)
    if images.image_exists(name):
        images.client().images.remove(name, force=True)  # a true rebuild, as on a new machine
    built = envbuild.build_all(shipped, backend="docker")
    assert [(b.status, b.where) for b in built] == [("built", name)], built
    inside = images.client().containers.run(
        name, ["sh", "-c", "ls -A /testbed | wc -l; cat /opt/featdel/venv/pyvenv.cfg; "
               "ls /opt/featdel/venv/lib/python3*/site-packages | grep -c -e ^pip -e ^setuptools; "
               "grep -rl -e /work -e /root/.cache -e pytest-of /opt/featdel/venv --include=*.pth | wc -l"],
        remove=True, network_mode="none").decode()
    assert inside.splitlines()[0] == "0", inside  # no source in the image
    assert "home = /usr/bin" in inside and inside.splitlines()[-1] == "0", inside  # no host path
    assert inside.splitlines()[-2] == "0", inside  # no install tool: the lock names none
    backend = get_backend("docker")
    results = evaluate(shipped, gold_and_empty(shipped, tmp_path / "p.jsonl"), tmp_path / "r.jsonl", backend)
    assert_gold_only(results)
    assert not (empty_cache / "envs").exists()  # graded in the image, not from a host env
    assert read_jsonl(tmp_path / "r.jsonl", type(results[0]))


def test_one_failed_env_is_recorded_and_the_batch_goes_on(packaged_tiny, tmp_path):
    """In the session's own cache, where mining built the good env: it is reused, the bad one
    (locked with an interpreter this machine lacks) fails with the reason."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from featdel.core.shards import read_envs

    table = read_envs(packaged_tiny)
    [good] = table.to_pylist()
    bad = {**good, "env_id": "tinylib-bad", "python": "2.7.18"}
    run = ship(packaged_tiny, tmp_path / "run")
    pq.write_table(pa.Table.from_pylist([bad, good], schema=table.schema), run / "envs" / "envs-00000.parquet")
    built = {b.env_id: b for b in envbuild.build_all(run, backend="local")}
    assert built["tinylib-bad"].status == "failed" and "Python 2.7.18" in built["tinylib-bad"].reason
    assert built[good["env_id"]].status == "reused"


def test_a_row_without_lock_is_refused_in_one_line(packaged_tiny):
    from dataclasses import replace

    [row] = envbuild.read_rows(packaged_tiny)
    for build in (envbuild.build_local, envbuild.build_image):
        with pytest.raises(envbuild.EnvBuildError, match="has no lock: package the run again"):
            build(replace(row, lock=[], env_id="tinylib-nolock"))
    lock = row.lock
    names = {line.split("==")[0].lower() for line in lock}
    assert {"pytest", "coverage"} <= names and "tinylib" not in names and "pip" not in names
    assert envbuild.requirements(lock) == lock
    with pytest.raises(envbuild.EnvBuildError, match="local file"):
        envbuild.requirements(["mything @ local"])

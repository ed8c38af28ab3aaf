"""`featdel run --sandbox docker` validates in containers of a per-repo image and records
`image_name` on every task; the same deletions verify with the local backend to the same
verdicts and the same F2P lists."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest_sandbox import docker_base_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_docker_run_sets_image_name_and_local_agrees(tmp_path):
    docker_base_image()  # skips without an engine (fails under CI=true)
    # Per-repo images hold the env at its host path, and /tmp is a tmpfs inside containers:
    # keep this test's cache outside /tmp.
    cache = Path.home() / ".cache" / "featdel-tests" / uuid.uuid4().hex[:8]
    env = {**os.environ, "FEATDEL_CACHE": str(cache)}
    out = tmp_path / "run"
    try:
        done = subprocess.run(
            [sys.executable, "-m", "featdel.cli.main", "run", "pypi:inflection==0.5.1", "--sandbox", "docker",
             "--out", str(out), "--max-candidates", "2", "-s", "body", "-s", "function"],
            capture_output=True, text=True, timeout=1200, env=env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        verdicts = [json.loads(v) for v in (out / "verdicts.jsonl").read_text().splitlines()]
        docker_ok = {v["deletion_id"]: v for v in verdicts if v["status"] == "verified"}
        assert docker_ok
        assert all(v["image_name"] and v["image_name"].startswith("featdel-env-") for v in docker_ok.values())
        from featdel.core.shards import read_tasks

        assert all(read_tasks(out).column("image_name").to_pylist())

        local = tmp_path / "local"
        shutil.copytree(out, local)
        (local / "verdicts.jsonl").unlink()
        again = subprocess.run([sys.executable, "-m", "featdel.cli.main", "verify", str(local), "--sandbox", "local"],
                               capture_output=True, text=True, timeout=1200, env=env)
        assert again.returncode == 0, again.stderr[-2000:]
        local_ok = {json.loads(v)["deletion_id"]: json.loads(v) for v in (local / "verdicts.jsonl").read_text().splitlines()}
        for deletion_id, v in docker_ok.items():
            assert local_ok[deletion_id]["status"] == "verified"
            assert local_ok[deletion_id]["FAIL_TO_PASS"] == v["FAIL_TO_PASS"]
    finally:
        shutil.rmtree(cache, ignore_errors=True)

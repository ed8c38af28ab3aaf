"""SWE-bench and Harbor exports grade like featdel does, inside the per-repo image.

Pins: every SWE-bench row names the image `featdel env build --sandbox docker` makes and carries
an eval script that, run in that image on the start state with the gold patch at /testbed,
exits 0; on the unchanged start state, or with the tests edited to pass, it exits non-zero.
Every Harbor task folder has the files Harbor reads, a task.toml that parses, and an
environment that builds FROM the per-repo image; `solution/solve.sh` then `tests/test.sh` writes
reward 1, `tests/test.sh` alone writes 0.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from featdel.code import trees
from featdel.env import envbuild
from featdel.interop import harbor as export_harbor
from featdel.interop import swebench as export_swebench
from featdel.interop.materialize import materialize
from tests.conftest_sandbox import docker_base_image

HARBOR_FILES = {"instruction.md", "task.toml", "environment/Dockerfile", "tests/test.sh", "tests/eval.sh",
                "solution/solve.sh", "solution/gold.patch"}


@pytest.fixture(scope="module")
def exported(packaged_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    assert export_swebench.export(packaged_tiny, out / "swebench.jsonl") > 0
    assert export_harbor.export(packaged_tiny, out / "harbor") > 0
    rows = [json.loads(line) for line in (out / "swebench.jsonl").read_text().splitlines()]
    return packaged_tiny, rows, out / "harbor"


def test_rows_and_folders_have_the_expected_shape(exported):
    run_dir, rows, harbor = exported
    for row in rows:
        assert row["image_name"] == envbuild.image_tag(row["env_id"])
        assert isinstance(row["FAIL_TO_PASS"], list) and row["FAIL_TO_PASS"]
        assert subprocess.run(["bash", "-n"], input=row["eval_script"], text=True).returncode == 0
        folder = harbor / row["instance_id"]
        assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} >= HARBOR_FILES
        config = tomllib.loads((folder / "task.toml").read_text())
        assert config["verifier"]["timeout_sec"] > 0 and config["metadata"]["instance_id"] == row["instance_id"]
        assert (folder / "environment/Dockerfile").read_text().startswith(f"FROM {row['image_name']}\n")
        assert (folder / "environment/repo/.git").is_dir()  # the start state, as a learner gets it
        assert row["problem_statement"].strip() in (folder / "instruction.md").read_text()


@pytest.fixture(scope="module")
def image(exported):
    docker_base_image()  # skips without an engine (fails under CI=true)
    run_dir, rows, _ = exported
    [built] = envbuild.build_all(run_dir, backend="docker")
    assert built.status in ("built", "reused"), built.reason
    return built.where


def _docker(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=600)


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_eval_script_passes_gold_only(exported, image, tmp_path):
    run_dir, rows, _ = exported
    row = rows[0]
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval.sh").write_text(row["eval_script"])

    def verdict(tree: Path) -> subprocess.CompletedProcess:
        return _docker("run", "--rm", "--network", "none", "-v", f"{tree}:/testbed", "-v",
                       f"{tmp_path / 'eval'}:/eval:ro", row["image_name"], "bash", "/eval/eval.sh")

    gold = tmp_path / "gold"
    materialize(run_dir, row["instance_id"], gold)
    trees.apply_patch(gold, row["patch"])
    done = verdict(gold)
    assert done.returncode == 0 and "RESOLVED" in done.stdout, done.stdout[-2000:] + done.stderr[-1000:]

    start = tmp_path / "start"
    materialize(run_dir, row["instance_id"], start)
    done = verdict(start)
    assert done.returncode == 1 and "UNRESOLVED" in done.stdout, done.stdout[-2000:]

    # Tests edited to pass: the script restores the task's own before running them.
    cheat = tmp_path / "cheat"
    materialize(run_dir, row["instance_id"], cheat)
    for test in row["FAIL_TO_PASS"]:
        path, name = test.split("::")[0], test.split("::")[-1]
        (cheat / path).write_text(f"def {name}():\n    pass\n")
    (cheat / "conftest.py").write_text("")
    done = verdict(cheat)
    assert done.returncode == 1, done.stdout[-2000:]
    assert not (cheat / "conftest.py").exists()  # added by the patch: not the task's


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_task_rewards_gold_only(exported, image, tmp_path):
    _, rows, harbor = exported
    folder = harbor / rows[0]["instance_id"]
    tag = f"featdel-harbor-test:{uuid.uuid4().hex[:8]}"
    built = _docker("build", "-q", "-t", tag, str(folder / "environment"))
    assert built.returncode == 0, built.stderr[-2000:]
    try:
        for command, reward in (("bash /solution/solve.sh && bash /tests/test.sh", "1"), ("bash /tests/test.sh", "0")):
            logs = tmp_path / f"logs-{reward}"
            logs.mkdir()
            done = _docker("run", "--rm", "--network", "none", "-v", f"{folder / 'tests'}:/tests:ro",
                           "-v", f"{folder / 'solution'}:/solution:ro", "-v", f"{logs}:/logs/verifier", tag,
                           "bash", "-c", command)
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
            assert (logs / "reward.txt").read_text().strip() == reward, done.stdout[-2000:]
            shutil.rmtree(logs, ignore_errors=True)
    finally:
        _docker("rmi", "-f", tag)

"""A JavaScript task goes through the docker sandbox and out of featdel as it does on bubblewrap.

Pins: `featdel run`'s stages with `--sandbox docker` mine a mocha project in a per-repo image (the
host's node, the env's node_modules) and verify its deletions there, recording `image_name`;
packaged, its env row alone (snapshot, `install_files`: package.json and the lock npm resolved,
since the tree has none) rebuilds the env in an empty cache, as an image with the lock installed
at /node_modules and as a local env, and `featdel evaluate --sandbox docker` grades in that image:
gold 1, empty 0. Exported, the SWE-bench row's eval script, run by hand in the env image on the
start state at /testbed, exits 0 with the gold patch and 1 without it or with the tests edited to
pass (it puts back the task's tests and deletes a planted `.mocharc.json`); SWE-bench's own
harness resolves gold and not the empty patch; a Harbor folder's environment builds and its
verifier, in a fresh container, writes reward 1 after the oracle and 0 after doing nothing.
Needs node, npm, the npm registry and a Docker engine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.conftest_sandbox import sandbox_backend

pytestmark = [pytest.mark.docker, pytest.mark.slow,
              pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")]


def _cli(*args: str, cache: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "featdel.cli.main", *args], capture_output=True, text=True,
                          timeout=1200, env={**os.environ, "FEATDEL_CACHE": str(cache)})


def _docker(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *argv], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def docker_run(tmp_path_factory):
    """(run dir, record, verdicts, tasks) of the mocha project through mine, delete, verify and
    package in the docker sandbox, and the empty cache the env is then rebuilt in."""
    from js_projects import MOCHA, made

    backend = sandbox_backend("docker")  # skips without an engine (fails under CI=true)
    caches = Path.home() / ".cache" / "featdel-tests" / f"js-docker-{uuid.uuid4().hex[:8]}"
    before = os.environ.get("FEATDEL_CACHE")
    os.environ["FEATDEL_CACHE"] = str(caches / "mine")
    try:
        run_dir, record, verdicts, tasks, _ = made(tmp_path_factory, "jsdock", MOCHA, backend, ["body"], 2)
        yield run_dir, record, verdicts, tasks, caches / "rebuilt"
    finally:
        if before is None:
            os.environ.pop("FEATDEL_CACHE", None)
        else:
            os.environ["FEATDEL_CACHE"] = before
        shutil.rmtree(caches, ignore_errors=True)


@pytest.fixture(scope="module")
def rebuilt(docker_run):
    """The env image and start-state images built from the shards alone, in the empty cache."""
    run_dir, *_, cache = docker_run
    done = _cli("env", "build", str(run_dir), "--sandbox", "docker", "--tasks", cache=cache)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout


def _predictions(run_dir: Path, path: Path) -> Path:
    from featdel.core import shards

    path.write_text("".join(json.dumps({"instance_id": r.instance_id, "model_name_or_path": model,
                                        "model_patch": r.patch if model == "gold" else ""}) + "\n"
                            for r in shards.task_rows(run_dir) for model in ("gold", "empty")))
    return path


def _rewards(results: Path) -> dict[tuple[str, str], float]:
    return {(r["model_name_or_path"], r["instance_id"]): r["reward"]
            for r in map(json.loads, results.read_text().splitlines())}


def test_docker_mines_and_verifies_in_a_per_repo_image(docker_run):
    from featdel.core import shards

    run_dir, record, verdicts, tasks, _ = docker_run
    assert record.language == "javascript" and record.image_name.startswith("featdel-env-")
    verified = [v for v in verdicts if v.status == "verified"]
    assert tasks == len(verified) >= 1, [(v.deletion_id, v.rule, v.reason) for v in verdicts]
    assert all(v.image_name == record.image_name for v in verified)
    [env] = shards.env_rows(run_dir)
    files = {f["path"]: f["text"] for f in env.install_files}
    assert set(files) == {"package.json", "package-lock.json"}  # the tree has no lock: npm's is recorded
    assert json.loads(files["package-lock.json"])["packages"]["node_modules/mocha"]["version"]
    assert any(e.startswith("node@") for e in env.lock)


def test_env_build_rebuilds_from_the_rows_and_evaluate_grades_in_the_image(docker_run, rebuilt, tmp_path):
    from featdel.core import shards

    run_dir, *_, cache = docker_run
    [env] = shards.env_rows(run_dir)
    assert f"featdel-env:{env.env_id}" in rebuilt
    assert not (cache / "envs" / env.env_id).exists()  # only the image: evaluate must grade in it
    preds = _predictions(run_dir, tmp_path / "preds.jsonl")
    done = _cli("evaluate", str(run_dir), "--predictions", str(preds), "--out", str(tmp_path / "docker.jsonl"),
                "--sandbox", "docker", cache=cache)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rewards = _rewards(tmp_path / "docker.jsonl")
    assert rewards and all(r == (1.0 if model == "gold" else 0.0) for (model, _), r in rewards.items()), rewards
    # the same row rebuilds the env locally too, with the locked versions
    done = _cli("env", "build", str(run_dir), cache=cache)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    lock = json.loads((cache / "envs" / env.env_id / "package-lock.json").read_text())
    installed = json.loads((cache / "envs" / env.env_id / "node_modules" / "mocha" / "package.json").read_text())
    assert installed["version"] == lock["packages"]["node_modules/mocha"]["version"]
    done = _cli("evaluate", str(run_dir), "--predictions", str(preds), "--out", str(tmp_path / "local.jsonl"),
                cache=cache)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert _rewards(tmp_path / "local.jsonl") == rewards


def test_a_row_without_its_lock_is_refused_in_one_line(docker_run):
    import dataclasses

    from featdel.core import shards
    from featdel.core.errors import EnvBuildError
    from featdel.lang.javascript import rebuild

    [env] = shards.env_rows(docker_run[0])
    with pytest.raises(EnvBuildError, match="no package.json and lock"):
        rebuild.build_local(dataclasses.replace(env, env_id="nolock", install_files=[]))
    # a lock other than the one `lock` lists (and env_id hashes) is not installed
    files = {f["path"]: f["text"] for f in env.install_files}
    lock = json.loads(files["package-lock.json"])
    lock["packages"]["node_modules/mocha"]["version"] = "0.0.1"
    forged = [{"path": "package.json", "text": files["package.json"]},
              {"path": "package-lock.json", "text": json.dumps(lock)}]
    with pytest.raises(EnvBuildError, match="does not hold the packages"):
        rebuild.build_local(dataclasses.replace(env, env_id="forged", install_files=forged))


@pytest.fixture(scope="module")
def exported(docker_run, rebuilt, tmp_path_factory):
    from featdel.interop import harbor, swebench

    run_dir = docker_run[0]
    out = tmp_path_factory.mktemp("js-exports")
    assert swebench.export(run_dir, out / "swebench.jsonl").written == docker_run[3]
    assert harbor.export(run_dir, out / "harbor").written == docker_run[3]
    rows = [json.loads(line) for line in (out / "swebench.jsonl").read_text().splitlines()]
    return run_dir, rows, out


def test_the_eval_script_run_by_hand_in_the_image_passes_gold_only(exported, tmp_path):
    from featdel.code import trees
    from featdel.interop.materialize import materialize

    run_dir, rows, _ = exported
    row = rows[0]
    assert row["log_parser"] == "parse_log_jest_json"  # mocha's ids hold spaces
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval" / "eval.sh").write_text(row["eval_script"])

    def verdict(name: str, patch: str | None = None, edit=None) -> tuple[subprocess.CompletedProcess, Path]:
        tree = tmp_path / name
        materialize(run_dir, row["instance_id"], tree)
        if patch:
            trees.apply_patch(tree, patch)
        if edit:
            edit(tree)
        return _docker("run", "--rm", "--network", "none", "-v", f"{tree}:/testbed", "-v",
                       f"{tmp_path / 'eval'}:/eval:ro", row["env_image"], "bash", "/eval/eval.sh"), tree

    done, _ = verdict("gold", row["patch"])
    assert done.returncode == 0 and "RESOLVED" in done.stdout, done.stdout[-2000:] + done.stderr[-1000:]
    assert all(f"[PASSED] {t}" in done.stdout for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"])
    done, _ = verdict("start")
    assert done.returncode == 1 and "UNRESOLVED" in done.stdout, done.stdout[-2000:]

    def cheat(tree: Path) -> None:  # every test file passes, and mocha is told to load none of them
        for test in {t.split("::")[0] for t in row["FAIL_TO_PASS"]}:
            (tree / test).write_text("it('passes', () => {});\n")
        (tree / ".mocharc.json").write_text(json.dumps({"spec": ["nothing/*.js"]}))

    done, tree = verdict("cheat", edit=cheat)
    assert done.returncode == 1, done.stdout[-2000:]
    assert not (tree / ".mocharc.json").exists()  # added by the patch: not the task's


def test_swebench_harness_resolves_gold_and_not_the_empty_patch(exported, tmp_path):
    pytest.importorskip("swebench")
    from tests.swebench_run import predictions, run_harness

    _, rows, out = exported
    gold = run_harness(out / "swebench.jsonl", predictions(rows, "gold", lambda r: r["patch"]), tmp_path, "js-gold")
    assert sorted(gold["resolved_ids"]) == sorted(r["instance_id"] for r in rows), gold
    empty = run_harness(out / "swebench.jsonl", predictions(rows, "empty", lambda r: ""), tmp_path, "js-empty")
    assert not empty["resolved_ids"], empty


def _harbor_reward(folder: Path, image: str, agent: str, tmp_path: Path) -> str:
    """A Harbor trial with a separate verifier (as tests/test_exports.py runs one): the agent as
    uid 65532 in one container, then tests/test.sh as root in a fresh one that gets its /testbed."""
    box = _docker("run", "-d", "--network", "none", "--user", "65532", "-v", f"{folder / 'solution'}:/solution:ro",
                  image, "sleep", "infinity").stdout.strip()
    try:
        assert _docker("exec", box, "bash", "-c", agent).returncode == 0
        artifact = tmp_path / f"testbed-{uuid.uuid4().hex[:6]}"
        assert _docker("cp", f"{box}:/testbed", str(artifact)).returncode == 0
    finally:
        _docker("rm", "-f", box)
    logs = tmp_path / f"logs-{artifact.name}"
    logs.mkdir()
    done = _docker("run", "--rm", "--network", "none", "-v", f"{artifact}:/testbed", "-v",
                   f"{folder / 'tests'}:/tests:ro", "-v", f"{logs}:/logs/verifier", image, "bash", "/tests/test.sh")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return (logs / "reward.txt").read_text().strip()


def test_a_harbor_folder_rewards_the_oracle_and_not_doing_nothing(exported, tmp_path):
    import tomllib

    _, rows, out = exported
    folder = out / "harbor" / rows[0]["instance_id"]
    assert "javascript" in tomllib.loads((folder / "task.toml").read_text())["task"]["keywords"]
    tag = f"featdel-harbor-test:{uuid.uuid4().hex[:8]}"
    built = _docker("build", "-q", "-t", tag, str(folder / "environment"))
    assert built.returncode == 0, built.stderr[-2000:]
    try:
        rewards = {agent: _harbor_reward(folder, tag, cmd, tmp_path)
                   for agent, cmd in {"oracle": "bash /solution/solve.sh", "nop": "true"}.items()}
    finally:
        _docker("rmi", "-f", tag)
    assert rewards == {"oracle": "1", "nop": "0"}

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
import sys
import tomllib
import uuid
from pathlib import Path

import pytest

from featdel.code import trees
from featdel.env import envbuild, taskimage
from featdel.interop import harbor as export_harbor
from featdel.interop import swebench as export_swebench
from featdel.interop.materialize import materialize
from tests.conftest_sandbox import docker_base_image

HARBOR_FILES = {"instruction.md", "task.toml", "environment/Dockerfile", "environment/docker-compose.yaml",
                "tests/test.sh", "tests/eval.sh", "solution/solve.sh", "solution/gold.patch"}


@pytest.fixture(scope="module")
def exported(packaged_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("exports")
    assert export_swebench.export(packaged_tiny, out / "swebench.jsonl").written > 0
    assert export_harbor.export(packaged_tiny, out / "harbor").written > 0
    rows = [json.loads(line) for line in (out / "swebench.jsonl").read_text().splitlines()]
    return packaged_tiny, rows, out / "harbor"


def test_rows_and_folders_have_the_expected_shape(exported):
    run_dir, rows, harbor = exported
    from swebench.harness.log_parsers import PARSER_REGISTRY
    from swebench.harness.utils import make_test_spec

    for row in rows:
        assert row["image"] == row["image_name"] == taskimage.task_image_tag(row["instance_id"])
        assert row["env_image"] == envbuild.image_tag(row["env_id"])
        assert row["log_parser"] in PARSER_REGISTRY and row["eval_type"] == "pass_and_fail"
        spec = make_test_spec(row)  # what the harness builds from a row: every key it needs is there
        assert spec.FAIL_TO_PASS == row["FAIL_TO_PASS"] and "SWEBENCH_TEST_EXIT_CODE=$?" in spec.eval_script
        assert isinstance(row["FAIL_TO_PASS"], list) and row["FAIL_TO_PASS"]
        assert subprocess.run(["bash", "-n"], input=row["eval_script"], text=True).returncode == 0
        folder = harbor / row["instance_id"]
        assert {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()} >= HARBOR_FILES
        config = tomllib.loads((folder / "task.toml").read_text())
        assert config["verifier"]["timeout_sec"] > 0 and config["metadata"]["instance_id"] == row["instance_id"]
        assert (folder / "environment/Dockerfile").read_text().startswith(f"FROM {row['env_image']}")
        assert not (folder / "environment/repo/.git").exists()  # the image makes the repository
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
                       f"{tmp_path / 'eval'}:/eval:ro", row["env_image"], "bash", "/eval/eval.sh")

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


# What a Harbor agent (uid 65532, as task.toml says) does before the verifier runs: the oracle's
# solve.sh, nothing, or the ways to earn reward without the work.
AGENTS = {
    "oracle": "bash /solution/solve.sh",
    "nop": "true",
    "plant": "echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json",
    "writer": "nohup sh -c 'while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.1; done' >/dev/null 2>&1 &",
    # Code in the library that the tests import: it starts a process that keeps writing the reward.
    "daemon": "for f in $(git ls-files '*.py' | grep -v test); do printf '\\nimport subprocess as _s\\n"
              "_s.Popen([\"sh\", \"-c\", \"while :; do echo 1 > /logs/verifier/reward.txt; sleep 0.1; done\"],"
              " start_new_session=True)\\n' >> $f; done",
    # Files in /testbed that run at test time and pass every test.
    "tree": "printf 'import pytest\\n@pytest.hookimpl(hookwrapper=True)\\ndef pytest_runtest_makereport(item, call):\\n"
            "    out = yield\\n    out.get_result().outcome = \"passed\"\\n' > conftest.py && "
            "echo 'import os; open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")' > sitecustomize.py",
}


def _harbor_trial(folder: Path, image: str, agent: str, tmp_path: Path) -> str:
    """One Harbor trial with a separate verifier, as Harbor 0.25 runs it: the agent works in a
    container of the task's image (no network, /logs/verifier shared and writable, as Harbor mounts
    it); then a fresh container of the same image gets only the agent's /testbed (the artifact) and
    an empty /logs/verifier, and runs tests/test.sh as root. Returns the reward file's text."""
    logs = tmp_path / f"agent-logs-{agent}"
    logs.mkdir(mode=0o777)
    logs.chmod(0o777)
    box = _docker("run", "-d", "--network", "none", "--user", "65532", "-v", f"{logs}:/logs/verifier",
                  "-v", f"{folder / 'solution'}:/solution:ro", image, "sleep", "infinity").stdout.strip()
    try:
        done = _docker("exec", box, "bash", "-c", AGENTS[agent])
        assert done.returncode == 0, done.stderr[-2000:]
        artifact = tmp_path / f"testbed-{agent}"
        assert _docker("cp", f"{box}:/testbed", str(artifact)).returncode == 0
    finally:
        _docker("rm", "-f", box)
    verifier_logs = tmp_path / f"verifier-logs-{agent}"
    verifier_logs.mkdir()
    done = _docker("run", "--rm", "--network", "none", "-v", f"{artifact}:/testbed", "-v",
                   f"{folder / 'tests'}:/tests:ro", "-v", f"{verifier_logs}:/logs/verifier", image,
                   "bash", "/tests/test.sh")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    import time

    time.sleep(0.5)  # a writer left running would have rewritten the reward by now
    return (verifier_logs / "reward.txt").read_text().strip()


@pytest.mark.docker
@pytest.mark.slow
def test_harbor_task_rewards_gold_only_in_a_separate_verifier(exported, image, tmp_path):
    _, rows, harbor = exported
    folder = harbor / rows[0]["instance_id"]
    tag = f"featdel-harbor-test:{uuid.uuid4().hex[:8]}"
    built = _docker("build", "-q", "-t", tag, str(folder / "environment"))
    assert built.returncode == 0, built.stderr[-2000:]
    try:
        rewards = {agent: _harbor_trial(folder, tag, agent, tmp_path) for agent in AGENTS}
    finally:
        _docker("rmi", "-f", tag)
    assert rewards == {agent: "1" if agent == "oracle" else "0" for agent in AGENTS}


def test_harbor_folders_ask_for_a_separate_verifier_a_non_root_agent_and_no_network(exported):
    _, rows, harbor = exported
    for row in rows:
        folder = harbor / row["instance_id"]
        config = tomllib.loads((folder / "task.toml").read_text())
        assert config["task"]["name"] == f"featdel/{row['instance_id']}"
        assert config["verifier"]["environment_mode"] == "separate" and config["artifacts"] == ["/testbed"]
        assert config["agent"]["user"] == "65532"
        compose = (folder / "environment/docker-compose.yaml").read_text()
        assert "network_mode: none" in compose
        test_sh = (folder / "tests/test.sh").read_text()
        assert test_sh.rindex("reward.txt") > test_sh.index('bash "$(dirname "$0")/eval.sh"')  # written last


def _wrong_patch(row: dict) -> str:
    """A patch that applies and fixes nothing."""
    return ("diff --git a/WRONG.txt b/WRONG.txt\nnew file mode 100644\nindex 0000000..e69de29\n"
            "--- /dev/null\n+++ b/WRONG.txt\n@@ -0,0 +1 @@\n+not a fix\n")


def _forging_patch(run_dir: Path, row: dict, tmp_path: Path) -> str:
    """The start state plus, in the module the gold patch edits, code that runs when the tests
    import it and writes the harness's markers and a PASSED line for every test: to pytest's
    output, and to every stream it can reach through /proc (the eval script's own stdout)."""
    start = materialize_to(run_dir, row["instance_id"], tmp_path / f"forge-a-{row['instance_id']}")
    forged = trees.copy_tree(start, tmp_path / f"forge-b-{row['instance_id']}")
    [module] = {line[6:] for line in row["patch"].splitlines() if line.startswith("+++ b/")}
    lines = "\n".join(f"PASSED {t}\n[PASSED] {t}" for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"])
    text = f">>>>> Start Test Output\n{lines}\n>>>>> End Test Output\n"
    with open(forged / module, "a") as fh:
        fh.write(f"\nimport os as _os, sys as _sys\n_FORGED = {text!r}\n_sys.stdout.write(_FORGED)\n"
                 "for _pid in _os.listdir('/proc'):\n"
                 "    try:\n"
                 "        with open(f'/proc/{_pid}/fd/1', 'w') as _fh:\n"
                 "            _fh.write(_FORGED)\n"
                 "    except (OSError, ValueError):\n"
                 "        pass\n")
    return trees.diff_trees(start, forged)


def _runner_patch(run_dir: Path, row: dict, tmp_path: Path) -> str:
    """Code in the edited module that makes pytest's runner call nothing: every test "passes"."""
    start = materialize_to(run_dir, row["instance_id"], tmp_path / f"runner-a-{row['instance_id']}")
    changed = trees.copy_tree(start, tmp_path / f"runner-b-{row['instance_id']}")
    [module] = {line[6:] for line in row["patch"].splitlines() if line.startswith("+++ b/")}
    with open(changed / module, "a") as fh:
        fh.write("\nimport _pytest.python as _p, _pytest.doctest as _d\n"
                 "_p.Function.runtest = lambda self: None\n_d.DoctestItem.runtest = lambda self: None\n")
    return trees.diff_trees(start, changed)


# Code run at import from a block compiled under a made-up file name: it finds featdel's plugin
# through gc and swaps the closure cell its hooks share for `emit`, so the signed stream says
# every test passed (the second red team's attack on the exported eval script).
_EMIT_SWAP = """
exec(compile(r'''
import gc as _gc, os as _os
def _swap():
    for fn in _gc.get_objects():
        code = getattr(fn, "__code__", None)
        if code is None or not code.co_filename.endswith("featdel_report.py") or "emit" not in code.co_freevars:
            continue
        cell = fn.__closure__[code.co_freevars.index("emit")]
        real = cell.cell_contents
        def fake(rec, real=real):
            if rec.get("kind") == "trip":
                return
            if rec.get("kind") == "test":
                rec = dict(rec, outcome="passed")
            if rec.get("kind") == "end":
                real(dict(rec, exitstatus=0))
                _os._exit(0)
            real(rec)
        cell.cell_contents = fake
        return
_swap()
''', "featdel-helper", "exec"), {})
"""


def _edited(run_dir: Path, row: dict, tmp_path: Path, tag: str, code: str, *, how: str = "append") -> str:
    """A patch that adds `code` to the module the gold patch edits: appended (`append`), behind a
    first line of \\x1c characters, which str.splitlines counts as line breaks and Python does not
    (`skew`), or with the module turned into a symlink to a .txt file holding it (`symlink`)."""
    start = materialize_to(run_dir, row["instance_id"], tmp_path / f"{tag}-a-{row['instance_id']}")
    changed = trees.copy_tree(start, tmp_path / f"{tag}-b-{row['instance_id']}")
    [module] = {line[6:] for line in row["patch"].splitlines() if line.startswith("+++ b/")}
    text = (changed / module).read_text() + code
    if how == "skew":
        text = "#" + "\x1c" * 40 + "\n" + text
    if how == "symlink":
        (changed / module).unlink()
        (changed / module).with_suffix(".txt").write_text(text)
        (changed / module).symlink_to((changed / module).with_suffix(".txt").name)
    else:
        (changed / module).write_text(text)
    return trees.diff_trees(start, changed)


def _gitconfig_patch(row: dict) -> str:
    """A patch `git apply` refuses (it writes .git/config, naming a diff driver that runs a script
    as root when the harness runs `git diff`), which the harness hands to `patch` next."""
    body = ["[diff]", "\texternal = /bin/sh /testbed/x.sh"]
    return ("diff --git a/.git/config b/.git/config\n--- a/.git/config\n+++ b/.git/config\n"
            "@@ -0,0 +1,2 @@\n" + "".join(f"+{ln}\n" for ln in body)
            + "diff --git a/x.sh b/x.sh\nnew file mode 100755\n--- /dev/null\n+++ b/x.sh\n@@ -0,0 +1 @@\n"
            "+touch /opt/featdel/venv/pwned\n")


def _shadow_patch(row: dict) -> str:
    """Modules in the tree's root named like the standard library's that the eval script's own
    Python (root) would import from the working directory: each prints a PASSED line per test."""
    lines = "".join(f"print({f'PASSED {t}'!r}); print({f'[PASSED] {t}'!r})\n"
                    for t in row["FAIL_TO_PASS"] + row["PASS_TO_PASS"])
    body = f"import sys\n{lines}sys.exit(0)\n".splitlines()
    return "".join(f"diff --git a/{name} b/{name}\nnew file mode 100644\n--- /dev/null\n+++ b/{name}\n"
                   f"@@ -0,0 +1,{len(body)} @@\n" + "".join(f"+{ln}\n" for ln in body)
                   for name in ("json.py", "tarfile.py", "base64.py", "zlib.py", "difflib.py"))


def materialize_to(run_dir: Path, instance_id: str, dest: Path) -> Path:
    materialize(run_dir, instance_id, dest)
    shutil.rmtree(dest / ".git")
    return dest


@pytest.fixture(scope="module")
def task_images(exported, image):
    run_dir, rows, _ = exported
    built = taskimage.build_all(run_dir)
    assert built and all(b.status in ("built", "reused") for b in built), [b.reason for b in built]
    return rows


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_harness_resolves_gold_only_and_agrees_with_featdel_evaluate(exported, task_images, tmp_path,
                                                                              local_backend):
    """SWE-bench's own harness on the rows: it resolves gold on every task, and none of: a patch
    that fixes nothing, one whose code prints the harness's markers and PASSED lines (to every
    stream it can reach), one that stubs out pytest's runner, one that adds modules named like the
    standard library's, one whose code (compiled under a made-up name, behind a line-number skew,
    or in a file the module is a symlink to) rewires featdel's plugin, one that writes .git/config;
    featdel evaluate gives the same verdicts."""
    from featdel.grading.evaluate import evaluate
    from tests.swebench_run import predictions, run_harness, test_output

    run_dir, rows, _ = exported
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    every = {r["instance_id"] for r in rows}
    models = {"gold": lambda r: r["patch"], "wrong": _wrong_patch,
              "forge": lambda r: _forging_patch(run_dir, r, tmp_path),
              "runner": lambda r: _runner_patch(run_dir, r, tmp_path), "shadow": _shadow_patch,
              "emit": lambda r: _edited(run_dir, r, tmp_path, "emit", _EMIT_SWAP),
              "skew": lambda r: _edited(run_dir, r, tmp_path, "skew", _EMIT_SWAP, how="skew"),
              "symlink": lambda r: _edited(run_dir, r, tmp_path, "symlink", _EMIT_SWAP, how="symlink"),
              "gitconfig": _gitconfig_patch}
    for model, patch_of in models.items():
        preds = predictions(rows, model, patch_of)
        report = run_harness(data, preds, tmp_path / "harness", f"t-{model}")
        resolved = set(report["resolved_ids"])
        # git refuses the gitconfig patch and the image has no `patch`: the harness cannot apply it
        assert set(report["error_ids"]) == (every if model == "gitconfig" else set()), (model, report)
        assert resolved == (every if model == "gold" else set()), (model, report)
        (tmp_path / f"{model}.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
        ours = evaluate(run_dir, tmp_path / f"{model}.jsonl", tmp_path / f"{model}.results.jsonl", local_backend)
        assert {r.instance_id for r in ours if r.status == "resolved"} == resolved, (model, ours)
    log = test_output(tmp_path / "harness", "t-forge", "forge", rows[0]["instance_id"])
    assert log.count(">>>>> Start Test Output") == 1, log[-3000:]  # the forged markers never reach the log


@pytest.mark.docker
@pytest.mark.slow
def test_skyrl_rows_reward_gold_only_the_way_skyrl_computes_it(exported, task_images, tmp_path):
    """SkyRL's mini-swe-agent reward (examples/train/mini_swe_agent/mini_swe_utils.py): a fresh
    container of `instance.image_name`, `git apply` of the agent's diff in /testbed, then
    `bash <<'EOF'\\n{eval_script}\\nEOF`; reward 1 when that exits 0."""
    import pyarrow.parquet as pq

    from featdel.interop import skyrl

    run_dir, rows, _ = exported
    assert skyrl.export(run_dir, tmp_path / "skyrl").written == len(rows)
    table = pq.read_table(tmp_path / "skyrl" / "train.parquet").to_pylist() + \
        pq.read_table(tmp_path / "skyrl" / "validation.parquet").to_pylist()
    assert sorted(r["instance"]["instance_id"] for r in table) == sorted(r["instance_id"] for r in rows)
    row = table[0]
    assert row["env_class"] == "null" and row["prompt"][0]["role"] == "user"
    instance = row["instance"]
    assert json.loads(instance["FAIL_TO_PASS"]) == next(r for r in rows if r["instance_id"] == instance["instance_id"])[
        "FAIL_TO_PASS"]

    def reward(diff: str) -> int:
        box = _docker("run", "-d", "--network", "none", instance["image_name"], "sleep", "infinity").stdout.strip()
        try:
            if diff:
                applied = subprocess.run(["docker", "exec", "-i", "-w", "/testbed", box, "git", "apply", "-"],
                                         input=diff, capture_output=True, text=True, timeout=120)
                assert applied.returncode == 0, applied.stderr
            done = subprocess.run(["docker", "exec", "-i", box, "bash"], input=f"bash <<'EOF'\n{instance['eval_script']}\nEOF\n",
                                  capture_output=True, text=True, timeout=600)
            return int(done.returncode == 0)
        finally:
            _docker("rm", "-f", box)

    assert (reward(instance["patch"]), reward(""), reward(_wrong_patch(instance))) == (1, 0, 0)


def test_taskrepo_passes_swebench_checks_and_builds_the_same_rows(exported, tmp_path):
    """swebench's own `dataset check` accepts the task repo and `dataset build` turns it into the
    rows `--format swebench` writes (the image aside: a task repo names swebench's)."""
    import pyarrow.parquet as pq

    from featdel.interop import taskrepo

    run_dir, rows, _ = exported
    out = tmp_path / "taskrepo"
    assert taskrepo.export(run_dir, out).written == len(rows)
    swebench = [str(Path(sys.executable).with_name("swebench"))]
    done = subprocess.run([*swebench, "dataset", "check", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "looks well formed" in done.stdout + done.stderr, done.stdout + done.stderr
    done = subprocess.run([*swebench, "dataset", "build", str(out), "-o", str(tmp_path / "built")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    [parquet] = (tmp_path / "built").rglob("test.parquet")
    built = {r["instance_id"]: r for r in pq.read_table(parquet).to_pylist()}
    for row in rows:
        got = built[row["instance_id"]]
        assert got["image"] == taskrepo.expected_image(row["instance_id"])
        for key in ("eval_script", "patch", "problem_statement", "log_parser", "eval_type", "base_commit"):
            assert got[key] == row[key], key
        assert list(got["FAIL_TO_PASS"]) == row["FAIL_TO_PASS"] and list(got["PASS_TO_PASS"]) == row["PASS_TO_PASS"]


def test_every_export_of_the_same_run_has_the_same_bytes(exported, tmp_path):
    from featdel.interop import hub, skyrl, taskrepo

    run_dir, _, _ = exported

    def export_all(dest: Path) -> dict[str, bytes]:
        export_swebench.export(run_dir, dest / "rows.jsonl")
        taskrepo.export(run_dir, dest / "taskrepo")
        skyrl.export(run_dir, dest / "skyrl")
        export_harbor.export(run_dir, dest / "harbor", dataset="my-org/tiny", parquet=dest / "harbor.parquet")
        hub.publish(run_dir, "my-org/tiny", dry_run=dest / "hub")
        return {p.relative_to(dest).as_posix(): p.read_bytes() for p in sorted(dest.rglob("*")) if p.is_file()}

    first = export_all(tmp_path / "a")
    second = export_all(tmp_path / "b")
    assert first.keys() == second.keys() and len(first) > 20
    assert [k for k in first if first[k] != second[k]] == []

"""`featdel export --format harbor`: one Harbor task folder per task.

In: a packaged run directory. Out: `OUT/<instance_id>/` laid out as Harbor (and Terminal-Bench,
SkyRL, rLLM, verifiers-style trainers) read a task:

    instruction.md          the problem statement, and where the repository is
    task.toml               timeouts, resources, metadata (repo, strategy, F2P/P2P counts)
    environment/Dockerfile  FROM the per-repo image (`featdel-env:<env_id>`, made by
                            `featdel env build --sandbox docker`), the start state copied to
                            /testbed, where the image's editable install points
    environment/repo/       the start state (one commit, no history, nothing deleted)
    tests/test.sh           runs tests/eval.sh (the SWE-bench export's eval script) and writes
                            1 or 0 to /logs/verifier/reward.txt
    solution/solve.sh       applies the gold patch; solution/gold.patch is the same patch

Why solve.sh carries the patched files instead of calling `git apply`: the per-repo image holds
only Debian's minimal base and the venv (no git, no patch); the files it writes are exactly
what `git apply gold.patch` gives, which the export checks on the host.
"""

from __future__ import annotations

import base64
import shutil
import tempfile
from pathlib import Path

from featdel.code import trees
from featdel.core.shards import EnvRow, TaskRow, image_tag
from featdel.env.envbuild import TESTBED
from featdel.interop.exported import Exported
from featdel.interop.swebench import eval_script

_TEST_SH = """#!/bin/bash
# featdel verifier: the reward is 1 only when every FAIL_TO_PASS and PASS_TO_PASS test passes.
mkdir -p /logs/verifier
if bash "$(dirname "$0")/eval.sh"; then
    echo 1 > /logs/verifier/reward.txt
else
    echo 0 > /logs/verifier/reward.txt
fi
exit 0
"""

_SOLVE_SH = """#!/bin/bash
# The gold patch (gold.patch beside this script), applied: the files it changes, as it leaves them.
set -euo pipefail
cd {testbed}
for path in {removed}; do rm -f -- "$path"; done
echo '{archive}' | base64 -d | tar -xzf - -C {testbed}
"""


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def task_toml(task: TaskRow) -> str:
    timeout = float(task.timeout_s or 600)
    d = task.difficulty or {}
    tags = [task.repo, task.strategy, "featdel", "python"]
    return "\n".join([
        'version = "1.0"',
        "",
        "[metadata]",
        'author_name = "featdel"',
        'category = "programming"',
        f'difficulty = "{_difficulty(d)}"',
        "tags = [" + ", ".join(_toml_str(t) for t in tags) + "]",
        f"instance_id = {_toml_str(task.instance_id)}",
        f"env_id = {_toml_str(task.env_id)}",
        f"fail_to_pass = {len(task.FAIL_TO_PASS)}",
        f"pass_to_pass = {len(task.PASS_TO_PASS)}",
        "",
        "[verifier]",
        f"timeout_sec = {max(120.0, 2 * timeout)}",
        "",
        "[agent]",
        "timeout_sec = 1800.0",
        "",
        "[environment]",
        "build_timeout_sec = 600.0",
        "cpus = 1",
        "memory_mb = 4096",
        "storage_mb = 10240",
        "",
    ])


def _difficulty(d: dict) -> str:
    lines = d.get("deleted_lines") or 0
    return "easy" if lines <= 10 else "medium" if lines <= 40 else "hard"


def instruction(task: TaskRow) -> str:
    return (f"{task.problem_statement.rstrip()}\n\n---\n\nThe repository is at `{TESTBED}` with its "
            "environment installed. Make the change in the library's code; the task's tests decide.\n")


def solve_sh(task: TaskRow, env: EnvRow) -> str:
    """solve.sh for one task: writes the files `git apply patch` gives (checked here on the host)."""
    from featdel.interop.swebench import graded_tree

    with tempfile.TemporaryDirectory(prefix="featdel-harbor-") as tmp:
        start = graded_tree(task, env, Path(tmp) / "start", with_tests=False)
        gold = trees.copy_tree(start, Path(tmp) / "gold")
        trees.apply_patch(gold, task.patch)
        changed = trees.changed_files(start, gold)
        removed = [rel for rel in changed if not (gold / rel).exists() and not (gold / rel).is_symlink()]
        archive = trees.targz(gold, [rel for rel in changed if rel not in removed])
    quoted = " ".join("'" + r.replace("'", "'\\''") + "'" for r in removed)
    return _SOLVE_SH.format(testbed=TESTBED, removed=quoted, archive=base64.b64encode(archive).decode())


def write_task(task: TaskRow, env: EnvRow, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    (dest / "environment").mkdir(parents=True)
    (dest / "tests").mkdir()
    (dest / "solution").mkdir()
    (dest / "instruction.md").write_text(instruction(task))
    (dest / "task.toml").write_text(task_toml(task))
    from featdel.interop.swebench import graded_tree

    graded_tree(task, env, dest / "environment" / "repo", with_tests=False)  # the start state
    (dest / "environment" / "Dockerfile").write_text(
        f"FROM {image_tag(task.env_id)}\nCOPY repo/ {TESTBED}/\nWORKDIR {TESTBED}\n")
    (dest / "tests" / "eval.sh").write_text(eval_script(task, env))
    (dest / "tests" / "test.sh").write_text(_TEST_SH)
    (dest / "solution" / "solve.sh").write_text(solve_sh(task, env))
    (dest / "solution" / "gold.patch").write_text(task.patch)
    for script in ("tests/eval.sh", "tests/test.sh", "solution/solve.sh"):
        (dest / script).chmod(0o755)
    return dest


def export(run_dir: Path, out: Path, *, dataset: str | None = None, parquet: Path | None = None) -> Exported:
    """Write one folder per task under `out`."""
    from featdel.interop.swebench import tasks_and_envs

    pairs = tasks_and_envs(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    for task, env in pairs:
        write_task(task, env, out / task.instance_id)
    return Exported(written=len(pairs))

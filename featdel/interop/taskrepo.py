"""`featdel export --format swebench-taskrepo`: swebench 5.x's "task repo" layout.

In: a packaged run directory. Out: a folder swebench's own tools read (`swebench dataset check`,
`swebench dataset build`, `swebench eval DATASET --task-repo OUT`):

    sweb.yaml                       datasets: [featdel/<run name>], splits: [test]
    tasks/<instance_id>/
      task.yaml                     instance_id, repo, version, base_commit, split, datasets, image,
                                    log_parser, eval_type, and featdel's env_id, strategy, created_at
      tests.json                    {"FAIL_TO_PASS": [...], "PASS_TO_PASS": [...]}
      gold.patch, test.patch        the row's patch and test_patch
      eval.sh                       the row's eval_script (featdel.interop.swebench)
      problem_statement.md, hints.md
      Dockerfile, repo/             the start-state image (featdel.env.taskimage) over the start state,
                                    FROM featdel-env:<env_id> (`featdel env build RUN --sandbox docker`)

swebench builds each task's image itself from its Dockerfile, with the task folder as the build
context, and names it as `expected_image` does (its checks refuse any other name).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from featdel.env.taskimage import dockerfile, write_start_state
from featdel.interop.exported import Exported, write_atomic
from featdel.interop.swebench import inexpressible, row, tasks_and_envs

SPLIT = "test"


def expected_image(instance_id: str) -> str:
    """The image name swebench's task checks require (swebench.task.checks.expected_image)."""
    return "swebench/" + f"sweb.eval.x86_64.{instance_id}:latest".lower().replace("__", "_1776_")


def dataset_name(run_dir: Path) -> str:
    return "featdel/" + (re.sub(r"[^A-Za-z0-9_.-]", "-", Path(run_dir).resolve().name) or "tasks")


def _yaml(data: dict) -> bytes:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, width=1000, allow_unicode=True).encode()


def write_task(task, env, sweb: dict, dest: Path, dataset: str) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    write_start_state(task, env, dest / "repo")
    write_atomic(dest / "task.yaml", _yaml({
        "instance_id": task.instance_id, "repo": task.repo, "version": sweb["version"],
        "base_commit": task.base_commit, "split": SPLIT, "datasets": [dataset],
        "image": expected_image(task.instance_id), "log_parser": sweb["log_parser"], "eval_type": sweb["eval_type"],
        "environment_setup_commit": task.environment_setup_commit, "created_at": sweb["created_at"],
        "env_id": task.env_id, "strategy": task.strategy}))
    write_atomic(dest / "tests.json", json.dumps(
        {"FAIL_TO_PASS": sweb["FAIL_TO_PASS"], "PASS_TO_PASS": sweb["PASS_TO_PASS"]}, indent=1).encode())
    write_atomic(dest / "gold.patch", sweb["patch"].encode())
    write_atomic(dest / "test.patch", sweb["test_patch"].encode())
    write_atomic(dest / "eval.sh", sweb["eval_script"].encode())
    write_atomic(dest / "problem_statement.md", sweb["problem_statement"].encode())
    if sweb["hints_text"]:
        write_atomic(dest / "hints.md", sweb["hints_text"].encode())
    write_atomic(dest / "Dockerfile", dockerfile(task.env_id).encode())
    (dest / "eval.sh").chmod(0o755)


def export(run_dir: Path, out: Path) -> Exported:
    dataset, left_out, written = dataset_name(run_dir), {}, []
    for task, env in tasks_and_envs(run_dir):
        if why := inexpressible(task):
            left_out[task.instance_id] = why
            continue
        write_task(task, env, row(task, env), out / "tasks" / task.instance_id, dataset)
        written.append(task.instance_id)
    for stale in sorted(p for p in (out / "tasks").glob("*") if p.is_dir() and p.name not in written):
        shutil.rmtree(stale)  # a task of an earlier export that this run no longer has
    write_atomic(out / "sweb.yaml", _yaml({"datasets": [dataset], "splits": [SPLIT]}))
    return Exported(written=len(written), left_out=left_out)


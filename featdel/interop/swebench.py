"""`featdel export --format swebench`: SWE-bench rows whose `eval_script` is the verdict.

In: a packaged run directory. Out: JSON Lines, one row per task, with SWE-bench's columns
(`instance_id`, `repo`, `base_commit`, `patch`, `test_patch`, `problem_statement`,
`FAIL_TO_PASS`, `PASS_TO_PASS` as real lists, ...), `image_name` (`featdel-env:<env_id>`, made
by `featdel env build --sandbox docker`) and `eval_script`. featdel's own columns ride along:
`deletion_patch` and `env_id` (the start state is the env's snapshot plus `deletion_patch`;
`featdel materialize` writes it).

The eval script runs inside that image on a tree at /testbed holding the start state with the
model patch applied. It (1) restores the task's tests and test configuration, the files
`featdel.grading.grade` never takes from a patch, from an archive inside the script (a protected
file the patch added goes); (2) runs the FAIL_TO_PASS and PASS_TO_PASS tests through featdel's
launcher and report plugin (carried in the script), so outcomes come from a report, never from
printed text; (3) exits 0 only when every one of them passed, was collected, and pytest's exit
status agrees with the report; 1 otherwise; 2 when the tree is not there. It trusts the
harness's container for isolation; `featdel evaluate` remains the hardened grader
(docs/grading.md).
"""

from __future__ import annotations

import base64
import io
import json
import re
import shlex
import tarfile
import tempfile
from importlib import resources
from pathlib import Path

from featdel.code import trees
from featdel.core.shards import image_tag
from featdel.env.envbuild import TESTBED, VENV
from featdel.grading.grade import MAX_IDS_ON_COMMAND_LINE, PROTECTED_NAMES, files_of_tests, protected

_RESTORE = """import base64, io, os, sys, tarfile
root, names, tests, keep = sys.argv[1], set(@NAMES@), set(@TEST_FILES@), set(@KEEP@)
def protected(rel):  # featdel.grading.grade.protected
    parts = rel.split("/"); name = parts[-1]
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py" or rel in tests or name in names
            or name.endswith(".pth"))
for dirpath, dirs, files in os.walk(root):
    if dirpath == root:
        dirs[:] = [d for d in dirs if d != ".git"]
    for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
        rel = os.path.relpath(os.path.join(dirpath, name), root)
        if protected(rel) and rel not in keep:
            os.unlink(os.path.join(dirpath, name))  # the patch added it: the task has no such file
with tarfile.open(fileobj=io.BytesIO(base64.b64decode(@ARCHIVE@))) as tar:
    for member in tar.getmembers():
        path = os.path.join(root, member.name)
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
    try:
        tar.extractall(root, filter="data")
    except TypeError:  # an interpreter from before extraction filters; the archive is the task's own
        tar.extractall(root)
"""

_CHECK = """import json, sys
report, code = sys.argv[1], int(sys.argv[2])
try:
    data = json.load(open(report))
except (OSError, ValueError) as exc:
    print(f"UNRESOLVED: no usable report ({exc}); pytest exited {code}"); sys.exit(1)
collected, tests, bad = set(data.get("collected", [])), data.get("tests", {}), []
for kind, ids in (("FAIL_TO_PASS", @F2P@), ("PASS_TO_PASS", @P2P@)):
    for t in ids:
        outcome = tests.get(t, {}).get("outcome", "missing") if t in collected else "missing"
        print(f"{kind} {outcome.upper()} {t}")
        if outcome != "passed":
            bad.append(t)
if bad:
    print(f"UNRESOLVED: {len(bad)} tests did not pass, e.g. {bad[0]}"); sys.exit(1)
if data.get("exitstatus") != code:
    print(f"UNRESOLVED: the report says pytest exited {data.get('exitstatus')}, the process exited {code}"); sys.exit(1)
if @BY_IDS@ and code != 0:
    print(f"UNRESOLVED: every test passed but pytest exited {code}"); sys.exit(1)
print("RESOLVED"); sys.exit(0)
"""


def graded_tree(task: dict, env: dict, dest: Path) -> Path:
    """The start state with `test_patch` applied: what grading tests, before the model's edits."""
    with tempfile.TemporaryDirectory(prefix="featdel-export-") as tmp:
        snapshot = Path(tmp) / "snapshot.tar.gz"
        snapshot.write_bytes(env["snapshot"])
        trees.start_state(snapshot, task["deletion_patch"], dest)
    if task["test_patch"]:
        trees.apply_patch(dest, task["test_patch"])
    return dest


def _files_archive(tree: Path, rels: list[str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=9) as tar:
        for rel in rels:
            tar.add(str(tree / rel), arcname=rel, recursive=False)
    return base64.b64encode(buf.getvalue()).decode()


def _fill(template: str, **values) -> str:
    """Python literals in place of @NAME@, in one pass (a value never gets substituted into)."""
    return re.sub(r"@([A-Z_0-9]+)@", lambda m: repr(values[m[1]]), template)


def _heredoc(tag: str, text: str) -> str:
    assert f"\n{tag}\n" not in f"\n{text}\n"
    return f"<<'{tag}'\n{text.rstrip()}\n{tag}"


def eval_script(task: dict, env: dict) -> str:
    """The bash script described in the module docstring, for one task row and its env row."""
    f2p, p2p = list(task["FAIL_TO_PASS"]), list(task["PASS_TO_PASS"])
    test_files = sorted(files_of_tests(f2p + p2p))
    with tempfile.TemporaryDirectory(prefix="featdel-export-") as tmp:
        tree = graded_tree(task, env, Path(tmp) / "tree")
        keep = sorted(rel for rel in trees.changed_files(Path(tmp) / "empty", tree)
                      if protected(rel, set(test_files)))
        archive = _files_archive(tree, keep)
    restore = _fill(_RESTORE, NAMES=sorted(PROTECTED_NAMES), TEST_FILES=test_files, KEEP=keep, ARCHIVE=archive)
    by_ids = len(f2p) + len(p2p) <= MAX_IDS_ON_COMMAND_LINE
    check = _fill(_CHECK, F2P=f2p, P2P=p2p, BY_IDS=by_ids)
    test_cmd = list(task["test_cmd"])
    if test_cmd[:3] != ["python", "-m", "pytest"]:
        raise ValueError(f"{task['instance_id']}: test command must start with `python -m pytest`: {test_cmd}")
    args = test_cmd[3:] + (["--", *f2p, *p2p] if by_ids else [])
    plugin = {name: resources.files("featdel").joinpath(f"env/pytest_plugin/{name}").read_text()
              for name in ("featdel_launch.py", "featdel_report.py")}
    timeout = int(task.get("timeout_s") or 600)
    return "\n".join([
        "#!/bin/bash",
        f"# featdel eval script for {task['instance_id']}: run in {image_tag(task['env_id'])} with the start",
        f"# state plus the model patch at {TESTBED}. Exit 0: resolved; 1: not resolved; 2: no tree.",
        "set -uo pipefail",
        f"cd {TESTBED} || exit 2",
        f"export PATH={VENV}/bin:$PATH VIRTUAL_ENV={VENV} PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 LANG=C.UTF-8",
        "WORK=$(mktemp -d)",
        "# 1. The task's tests and test configuration; the patch's edits to them do not count.",
        f'python - {TESTBED} {_heredoc("FEATDEL_RESTORE", restore)}',
        "[ $? -eq 0 ] || exit 2",
        "# 2. featdel's launcher and report plugin, outside the tree.",
        *(f'cat > "$WORK/{name}" {_heredoc("FEATDEL_PLUGIN", text)}' for name, text in plugin.items()),
        "# 3. FAIL_TO_PASS and PASS_TO_PASS; the report, not the output, is the verdict.",
        f'FEATDEL_REPORT="$WORK/report.json" timeout {timeout} python "$WORK/featdel_launch.py" '
        + " ".join(shlex.quote(a) for a in args) + ' > "$WORK/output.txt" 2>&1',
        "code=$?",
        'tail -c 4000 "$WORK/output.txt"',
        f'python - "$WORK/report.json" "$code" {_heredoc("FEATDEL_CHECK", check)}',
        "verdict=$?",
        'rm -rf "$WORK"',
        "exit $verdict",
        "",
    ])


def rows(run_dir: Path) -> list[dict]:
    """SWE-bench rows for every task of the run (see the module docstring)."""
    from featdel.core.shards import read_envs, read_tasks

    envs = {e["env_id"]: e for e in read_envs(run_dir).to_pylist()}
    out = []
    for task in read_tasks(run_dir).to_pylist():
        env = envs[task["env_id"]]
        created = task.get("created_at")
        out.append({
            "instance_id": task["instance_id"], "repo": task["repo"], "base_commit": task["base_commit"],
            "environment_setup_commit": task["environment_setup_commit"], "version": "featdel",
            "patch": task["patch"], "test_patch": task["test_patch"] or "",
            "problem_statement": task["problem_statement"], "hints_text": task["hints_text"] or "",
            "created_at": created.isoformat() if created is not None else "",
            "FAIL_TO_PASS": list(task["FAIL_TO_PASS"]), "PASS_TO_PASS": list(task["PASS_TO_PASS"]),
            "image_name": image_tag(task["env_id"]), "eval_script": eval_script(task, env),
            "deletion_patch": task["deletion_patch"], "env_id": task["env_id"], "strategy": task["strategy"],
        })
    return out


def export(run_dir: Path, out: Path) -> int:
    """Write the rows to `out` (JSON Lines); return how many."""
    from featdel.core.rundir import RunDir

    RunDir(run_dir).need(RunDir(run_dir).tasks_dir, f"run `featdel package {run_dir}` first")
    data = rows(run_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in data))
    tmp.replace(out)
    return len(data)

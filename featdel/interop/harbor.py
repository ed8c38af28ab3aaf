"""`featdel export --format harbor`: one Harbor task folder per task, lint-clean for Harbor 0.25.

In: a packaged run directory. Out: `OUT/<instance_id>/` laid out as Harbor (and the trainers that
run Harbor tasks: SkyRL, rLLM, verifiers-style) read a task:

    instruction.md          the problem statement, and where the repository is
    task.toml               [task] name ORG/<instance_id>; the agent runs as the unprivileged
                            `sandbox` user (uid 65532); the verifier runs in a separate
                            environment that gets only the agent's /testbed (`artifacts`)
    environment/Dockerfile  the start-state image (featdel.env.taskimage): FROM the per-repo image,
                            pinned by its registry digest when it has one, the start state at
                            /testbed as a one-commit git repository the agent user owns
    environment/docker-compose.yaml   no network for the agent's container (nor the verifier's)
    environment/repo/       the start state (nothing deleted, no `.git`: the image makes it)
    tests/test.sh           runs tests/eval.sh (the SWE-bench export's eval script) and writes
                            1 or 0 to /logs/verifier/reward.txt, last
    solution/solve.sh       writes the files the gold patch changes; solution/gold.patch is the patch

What the verifier can trust: the separate environment is a fresh container of the task's image,
so no process the agent started survives into it, /logs/verifier starts empty, and nothing the
agent changed outside /testbed (the venv, a sitecustomize) is there. Inside /testbed, eval.sh puts
back the task's tests and configuration and deletes what a patch added among them; it runs the
tests as the unprivileged user, kills whatever they started, and test.sh (root) writes the reward
into a folder that user cannot write.

Options: `dataset` writes `OUT/dataset.toml` (Harbor's dataset manifest, each task with the
content digest Harbor's packager computes); `parquet` writes the transport RL trainers download
(one row per task: `path`, the folder's name, and `task_binary`, a tar.gz of it).
`registry` (HOST:PORT) pushes each per-repo image there first, so every FROM can be pinned.
"""

from __future__ import annotations

import base64
import hashlib
import io
import shutil
import tempfile
from pathlib import Path

from featdel.code import trees
from featdel.core.shards import EnvRow, TaskRow, image_tag
from featdel.env.envbuild import TESTBED
from featdel.env.taskimage import dockerfile, write_start_state
from featdel.interop.exported import Exported, write_atomic
from featdel.interop.swebench import TEST_UID, eval_script, tasks_and_envs

_TEST_SH = f"""#!/bin/bash
# featdel verifier: reward 1 only when every FAIL_TO_PASS and PASS_TO_PASS test passes. Harbor runs
# it as root in a fresh container with the agent's /testbed (task.toml: environment_mode = "separate").
LOGS=/logs/verifier
mkdir -p "$LOGS" && chown 0:0 "$LOGS" && chmod 755 "$LOGS"  # the tests' user cannot write here
rm -rf "$LOGS/reward.txt" "$LOGS/reward.json"
bash "$(dirname "$0")/eval.sh"  # runs the tests as uid {TEST_UID} and kills what they started
verdict=$?
setpriv --reuid={TEST_UID} --regid={TEST_UID} --clear-groups kill -9 -1 2>/dev/null
rm -rf "$LOGS/reward.txt" "$LOGS/reward.json"
if [ "$verdict" -eq 0 ]; then echo 1 > "$LOGS/reward.txt"; else echo 0 > "$LOGS/reward.txt"; fi
exit 0
"""

_SOLVE_SH = """#!/bin/bash
# The gold patch (gold.patch beside this script), applied: the files it changes, as it leaves them.
set -euo pipefail
cd {testbed}
for path in {removed}; do rm -f -- "$path"; done
echo '{archive}' | base64 -d | tar -xzf - -C {testbed}
"""

_COMPOSE = """# The agent's container (and the separate verifier's) has no network: Harbor's own
# network_mode = "no-network" needs sidecar images pulled from a registry.
services:
  main:
    network_mode: none
"""

# What Harbor's packager leaves out of a task's content digest (harbor.publisher.packager).
_HASH_IGNORED_SUFFIXES = (".pyc", ".swp", ".swo", "~")


def _toml_str(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join(_toml_str(t) for t in items) + "]"


def task_name(task: TaskRow, org: str) -> str:
    return f"{org}/{task.instance_id}"


def task_toml(task: TaskRow, org: str) -> str:
    timeout = float(task.timeout_s or 600)
    first_line = (task.problem_statement.strip().splitlines() or [task.instance_id])[0][:200]
    return "\n".join([
        'schema_version = "1.4"',
        f'artifacts = ["{TESTBED}"]  # what the separate verifier gets from the agent',
        "",
        "[task]",
        f"name = {_toml_str(task_name(task, org))}",
        f"description = {_toml_str(first_line)}",
        f"keywords = {_toml_list([task.repo, task.strategy, 'featdel', task.language or 'python'])}",
        "",
        "[metadata]",
        'author_name = "featdel"',
        'category = "programming"',
        f'difficulty = "{_difficulty(task.difficulty or {})}"',
        f"tags = {_toml_list([task.repo, task.strategy, 'featdel', task.language or 'python'])}",
        f"instance_id = {_toml_str(task.instance_id)}",
        f"env_id = {_toml_str(task.env_id)}",
        f"fail_to_pass = {len(task.FAIL_TO_PASS)}",
        f"pass_to_pass = {len(task.PASS_TO_PASS)}",
        "",
        "[verifier]",
        f"timeout_sec = {max(120.0, 2 * timeout)}",
        'environment_mode = "separate"',
        "",
        "[agent]",
        "timeout_sec = 1800.0",
        f'user = "{TEST_UID}"  # `sandbox` in the image; /testbed is its',
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


def solve_sh(task: TaskRow, start: Path) -> str:
    """solve.sh for one task whose start state is `start`: writes the files `git apply patch` gives
    (checked here on the host)."""
    with tempfile.TemporaryDirectory(prefix="featdel-harbor-") as tmp:
        gold = trees.copy_tree(start, Path(tmp) / "gold")
        trees.apply_patch(gold, task.patch)
        changed = trees.changed_files(start, gold)
        removed = [rel for rel in changed if not (gold / rel).exists() and not (gold / rel).is_symlink()]
        archive = trees.targz(gold, [rel for rel in changed if rel not in removed])
    quoted = " ".join("'" + r.replace("'", "'\\''") + "'" for r in removed)
    return _SOLVE_SH.format(testbed=TESTBED, removed=quoted, archive=base64.b64encode(archive).decode())


def write_task(task: TaskRow, env: EnvRow, dest: Path, *, org: str, base: str | None) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    start = write_start_state(task, env, dest / "environment" / "repo")
    files = {
        "instruction.md": instruction(task), "task.toml": task_toml(task, org),
        "environment/Dockerfile": dockerfile(task.env_id, base=base), "environment/docker-compose.yaml": _COMPOSE,
        "tests/eval.sh": eval_script(task, env), "tests/test.sh": _TEST_SH,
        "solution/solve.sh": solve_sh(task, start), "solution/gold.patch": task.patch,
    }
    for rel, text in files.items():
        write_atomic(dest / rel, text.encode())
    for script in ("tests/eval.sh", "tests/test.sh", "solution/solve.sh"):
        (dest / script).chmod(0o755)
    return dest


def content_digest(folder: Path) -> str:
    """The digest Harbor's packager gives a task folder (`harbor sync` writes it to dataset.toml):
    sha256 over "relpath\\0sha256(file)\\n" for its files, sorted."""
    rels = [p for p in ("task.toml", "instruction.md", "README.md") if (folder / p).is_file()]
    for top in ("environment", "tests", "solution"):
        rels += [p.relative_to(folder).as_posix() for p in (folder / top).rglob("*") if p.is_file()
                 and "__pycache__" not in p.relative_to(folder).parts and p.name != ".DS_Store"
                 and not p.name.endswith(_HASH_IGNORED_SUFFIXES)]
    outer = hashlib.sha256()
    for rel in sorted(rels):
        outer.update(f"{rel}\0{hashlib.sha256((folder / rel).read_bytes()).hexdigest()}\n".encode())
    return "sha256:" + outer.hexdigest()


def dataset_toml(name: str, tasks: list[tuple[str, Path]]) -> str:
    lines = ['schema_version = "1.0"', "", "[dataset]", f"name = {_toml_str(name)}", 'version = "1.0.0"',
             'description = "Coding tasks made by featdel (feature deletion) from real, tested libraries."', ""]
    for task, folder in tasks:
        lines += ["[[tasks]]", f"name = {_toml_str(task)}", f'digest = "{content_digest(folder)}"', ""]
    return "\n".join(lines)


def parquet_transport(folders: list[Path]) -> bytes:
    """One row per folder: `path` (its name) and `task_binary` (a tar.gz of it, members relative to
    it, directories included), as OpenThoughts-Agent's converter writes and SkyRL's reader extracts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths, blobs = [], []
    for folder in folders:
        rels = [p.relative_to(folder).as_posix() for p in folder.rglob("*")]
        paths.append(folder.name)
        blobs.append(trees.targz(folder, rels))
    buf = io.BytesIO()
    pq.write_table(pa.table({"path": pa.array(paths, pa.string()), "task_binary": pa.array(blobs, pa.binary())}), buf)
    return buf.getvalue()


def pinned_bases(env_ids: set[str], registry: str | None) -> tuple[dict[str, str], list[str]]:
    """({env_id: IMAGE@sha256:DIGEST}, notes): the per-repo images pinned where they can be."""
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import images

    bases, notes = {}, []
    for env_id in sorted(env_ids):
        try:
            ref = images.pinned(image_tag(env_id), registry) if images.image_exists(image_tag(env_id)) else None
        except SandboxError as exc:
            raise SandboxError(f"cannot pin {image_tag(env_id)}: {exc}") from None
        if ref:
            bases[env_id] = ref
        else:
            notes.append(f"{image_tag(env_id)} has no registry digest: FROM names its tag "
                         f"(`--registry HOST:PORT` pushes it and pins it)")
    return bases, notes


def export(run_dir: Path, out: Path, *, dataset: str | None = None, parquet: Path | None = None,
           registry: str | None = None) -> Exported:
    """Write one folder per task under `out` (and the dataset manifest and parquet transport)."""
    from featdel.sandboxes import images

    pairs = tasks_and_envs(run_dir)
    org = dataset.split("/")[0] if dataset else "featdel"
    if dataset is not None and dataset.count("/") != 1:
        raise ValueError(f"--harbor-dataset {dataset!r}: give ORG/NAME, e.g. my-org/featdel-tasks")
    bases, notes = ({}, ["no docker engine: FROM names each per-repo image by its tag"]) \
        if images.engine_reason() else pinned_bases({t.env_id for t, _ in pairs}, registry)
    out.mkdir(parents=True, exist_ok=True)
    folders = [write_task(task, env, out / task.instance_id, org=org, base=bases.get(task.env_id))
               for task, env in pairs]
    if dataset:
        write_atomic(out / "dataset.toml",
                     dataset_toml(dataset, [(task_name(t, org), f) for (t, _), f in zip(pairs, folders)]).encode())
    if parquet:
        write_atomic(parquet, parquet_transport(folders))
    return Exported(written=len(folders), notes=notes)

"""Stage 4, package: verified tasks and their environments as Parquet shards.

In: a verified run directory. Out: `RUN_DIR/tasks/tasks-NNNNN.parquet` and
`RUN_DIR/envs/envs-NNNNN.parquet`, each with one Arrow schema declared here. Columns follow
SWE-bench where they overlap; `patch` has the SWE-bench meaning (the gold fix: applied to the
start state it restores the feature) and `deletion_patch` takes the original tree to the start
state. FAIL_TO_PASS and PASS_TO_PASS are real lists. The env's `snapshot` (the original tree,
tar.gz, no VCS data) is stored once per repo@commit, so a task is self-contained offline:
start state = extract snapshot, `git apply deletion_patch`.
"""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from featdel import difficulty, trees
from featdel.errors import RunDirError
from featdel.records import Deletion, RepoRecord, Verdict, VerdictStatus
from featdel.rundir import RunDir

DIFFICULTY = pa.struct([
    ("deleted_lines", pa.int32()), ("deleted_symbols", pa.int32()), ("files", pa.int32()),
    ("cyclomatic", pa.int32()), ("fail_to_pass", pa.int32()), ("pass_to_pass", pa.int32()),
    ("references", pa.int32()), ("similarity", pa.float32()), ("docstrings_kept", pa.bool_()),
    ("tests_visible", pa.bool_()),
])
# `featdel run --target-pass-rate`: the knobs chosen for the task and its predicted pass rate
# for the learner (featdel.curriculum.generate); null for tasks made without steering.
STEERING = pa.struct([
    ("learner", pa.string()), ("target_pass_rate", pa.float32()), ("predicted_pass_rate", pa.float32()),
    ("strategy", pa.string()), ("docstrings_kept", pa.bool_()), ("tests_visible", pa.bool_()),
    ("combined", pa.int32()),
])
TASK_SCHEMA = pa.schema([
    ("instance_id", pa.string()), ("repo", pa.string()), ("source", pa.string()),
    ("base_commit", pa.string()), ("environment_setup_commit", pa.string()), ("env_id", pa.string()),
    ("patch", pa.string()), ("deletion_patch", pa.string()), ("test_patch", pa.string()),
    ("problem_statement", pa.string()), ("hints_text", pa.string()),
    ("FAIL_TO_PASS", pa.list_(pa.string())), ("PASS_TO_PASS", pa.list_(pa.string())),
    ("test_cmd", pa.list_(pa.string())), ("strategy", pa.string()),
    ("deleted_symbols", pa.list_(pa.string())), ("difficulty", DIFFICULTY),
    ("image_name", pa.string()), ("timeout_s", pa.float32()), ("start_sha256", pa.string()),
    ("created_at", pa.timestamp("us", tz="UTC")), ("steering", STEERING),
])
ENV_SCHEMA = pa.schema([
    ("env_id", pa.string()), ("repo", pa.string()), ("source", pa.string()), ("base_commit", pa.string()),
    ("python", pa.string()), ("install", pa.list_(pa.list_(pa.string()))), ("test_cmd", pa.list_(pa.string())),
    ("package_dirs", pa.list_(pa.string())), ("snapshot", pa.binary()),
])
SHARD_ROWS = 1000


def env_id(record: RepoRecord) -> str:
    return Path(record.env_dir).name


def package(run_dir: Path, *, max_tasks: int | None = None, hide_tests: bool = False,
            steering: dict[str, dict] | None = None) -> tuple[int, int]:
    """Write the shards (replacing earlier ones); return (tasks, envs) written. With
    `hide_tests`, the start state also lacks the files of the F2P tests, and `test_patch`
    (SWE-bench meaning: applied before grading) brings them back."""
    rd = RunDir(run_dir)
    rd.stage_options("packaged", {"hide_tests": hide_tests, "max_tasks": max_tasks}, started=False)
    records = {r.name: r for r in rd.latest_repos().values()}
    deletions = {d.deletion_id: d for d in rd.deletions()}
    verified = [v for v in rd.verdicts() if v.status == VerdictStatus.VERIFIED]
    now = dt.datetime.now(dt.UTC)
    rows, used = [], {}
    for v in sorted(verified, key=lambda v: v.deletion_id)[:max_tasks]:
        record, deletion = records[v.repo], deletions[v.deletion_id]
        used[v.repo] = record
        knobs = (steering or {}).get(v.deletion_id)  # a steered task's own tests-visible knob
        row = task_row(run_dir, record, deletion, v, now, hide_tests=hide_tests if knobs is None
                       else not knobs["tests_visible"])
        rows.append(row | {"steering": {f.name: knobs.get(f.name) for f in STEERING} if knobs else None})
    env_rows = [env_row(run_dir, r) for r in sorted(used.values(), key=lambda r: r.name)]
    _write(rd.tasks_dir, "tasks", rows, TASK_SCHEMA)
    _write(rd.envs_dir, "envs", env_rows, ENV_SCHEMA)
    return len(rows), len(env_rows)


def task_row(run_dir: Path, record: RepoRecord, deletion: Deletion, verdict: Verdict, now,
             *, hide_tests: bool = False) -> dict:
    snapshot = RunDir(run_dir).snapshot(record.name)
    # What ships is what verify checked: its patches and statement, and a start state whose hash
    # matches the one it tested. Hidden tests: the F2P test files leave the start state and
    # `test_patch` restores them; the graded tree (start + patch + test_patch) is the verified one.
    deletion_patch, patch, test_patch = verdict.deletion_patch, verdict.patch, ""
    with tempfile.TemporaryDirectory(prefix="featdel-pkg-") as tmp:
        start = trees.start_state(snapshot, deletion_patch, Path(tmp) / "start")
        if trees.tree_digest(start) != verdict.start_sha256:
            raise RunDirError(f"{deletion.deletion_id}: the start state differs from the one verified; "
                              "run `featdel verify` again")
        feats = difficulty.features(deletion, start, verdict.FAIL_TO_PASS, verdict.PASS_TO_PASS)
    feats.update(similarity=verdict.similarity, tests_visible=not hide_tests)
    if hide_tests:
        hidden = {t.split("::")[0]: None for t in verdict.FAIL_TO_PASS}
        start_files = {**deletion.files, **hidden}
        deletion_patch = trees.diff_states(snapshot, {}, start_files)
        patch = trees.diff_states(snapshot, start_files, hidden)
        test_patch = trees.diff_states(snapshot, hidden, {})
    text = verdict.problem_statement
    return {
        "instance_id": deletion.deletion_id, "repo": record.name, "source": record.source,
        "base_commit": record.commit, "environment_setup_commit": record.commit, "env_id": env_id(record),
        "patch": patch, "deletion_patch": deletion_patch, "test_patch": test_patch, "problem_statement": text,
        "hints_text": "", "FAIL_TO_PASS": verdict.FAIL_TO_PASS, "PASS_TO_PASS": verdict.PASS_TO_PASS,
        "test_cmd": record.recipe.test_cmd, "strategy": deletion.strategy,
        "deleted_symbols": deletion.deleted_symbols, "difficulty": feats, "image_name": verdict.image_name,
        "timeout_s": verdict.timeout_s, "start_sha256": verdict.start_sha256, "created_at": now,
    }


def env_row(run_dir: Path, record: RepoRecord) -> dict:
    snapshot = RunDir(run_dir).snapshot(record.name)
    return {
        "env_id": env_id(record), "repo": record.name, "source": record.source, "base_commit": record.commit,
        "python": record.recipe.python, "install": record.recipe.install, "test_cmd": record.recipe.test_cmd,
        "package_dirs": record.recipe.package_dirs, "snapshot": snapshot.read_bytes(),
    }


def _write(folder: Path, stem: str, rows: list[dict], schema: pa.Schema) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{stem}-*.parquet"):
        old.unlink()
    for i in range(0, max(len(rows), 1), SHARD_ROWS):
        table = pa.Table.from_pylist(rows[i : i + SHARD_ROWS], schema=schema)
        pq.write_table(table, folder / f"{stem}-{i // SHARD_ROWS:05d}.parquet")


def read_tasks(run_dir: Path) -> pa.Table:
    return pq.read_table(RunDir(run_dir).tasks_dir, schema=TASK_SCHEMA)


def read_envs(run_dir: Path) -> pa.Table:
    return pq.read_table(RunDir(run_dir).envs_dir, schema=ENV_SCHEMA)

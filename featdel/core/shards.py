"""The shard format: the Arrow schemas of `tasks/*.parquet` and `envs/*.parquet`, their typed
rows, and the names that follow from a row (`env_id`, `image_tag`).

In: a run directory's shards, or records to turn into rows. Out: `TaskRow` and `EnvRow`
(frozen), or Arrow tables with exactly `TASK_SCHEMA` / `ENV_SCHEMA`. Every stage that reads or
writes shards comes here (package writes, env build, evaluate, exports and the curriculum read),
so the format has one home. docs/format.md documents every column; `schema_version` is in both
schemas, so a reader can tell a shard written by another featdel.

    env_id        f"{repo}-{sha256(json {repo, commit, python, lock})[:16]}": content-addressed,
                  so two machines that build the same env agree on it; a task's `env_id` names
                  its row. Built locally, the env is found at `cache_root()/"envs"/env_id`.
    image_name    `image_tag(env_id)`: the image `featdel env build --sandbox docker` makes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from featdel.core.errors import RunDirError
from featdel.core.records import Recipe, from_dict

if TYPE_CHECKING:
    import pyarrow as pa

SCHEMA_VERSION = 1  # bump when a column changes meaning or type
SHARD_ROWS = 1000
IMAGE_REPOSITORY = "featdel-env"


def env_id(name: str, commit: str, recipe: Recipe) -> str:
    """Content-addressed id of a built env: what is installed, not how it was asked for."""
    blob = json.dumps({"repo": name, "commit": commit, "python": recipe.python, "lock": recipe.lock},
                      sort_keys=True).encode()
    return f"{name}-{hashlib.sha256(blob).hexdigest()[:16]}"


def image_tag(env_id: str) -> str:
    """The docker image of an env: a pure function of `env_id`, so the shards can name it."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "-", env_id).lstrip(".-")[:128] or "env"
    return f"{IMAGE_REPOSITORY}:{tag}"


def _schemas() -> dict[str, pa.DataType | pa.Schema]:
    import pyarrow as pa

    difficulty = pa.struct([
        ("deleted_lines", pa.int32()), ("deleted_symbols", pa.int32()), ("files", pa.int32()),
        ("cyclomatic", pa.int32()), ("fail_to_pass", pa.int32()), ("pass_to_pass", pa.int32()),
        ("references", pa.int32()), ("similarity", pa.float32()), ("docstrings_kept", pa.bool_()),
        ("tests_visible", pa.bool_()),
    ])
    # `featdel run --target-pass-rate`: the knobs chosen for the task and its predicted pass rate
    # for the learner (featdel.curriculum); null for tasks made without steering.
    steering = pa.struct([
        ("learner", pa.string()), ("target_pass_rate", pa.float32()), ("predicted_pass_rate", pa.float32()),
        ("strategy", pa.string()), ("docstrings_kept", pa.bool_()), ("tests_visible", pa.bool_()),
        ("combined", pa.int32()),
    ])
    tasks = pa.schema([
        ("instance_id", pa.string()), ("repo", pa.string()), ("source", pa.string()),
        ("base_commit", pa.string()), ("environment_setup_commit", pa.string()), ("env_id", pa.string()),
        ("patch", pa.string()), ("deletion_patch", pa.string()), ("test_patch", pa.string()),
        ("problem_statement", pa.string()), ("hints_text", pa.string()),
        ("FAIL_TO_PASS", pa.list_(pa.string())), ("PASS_TO_PASS", pa.list_(pa.string())),
        ("test_cmd", pa.list_(pa.string())), ("strategy", pa.string()),
        ("deleted_symbols", pa.list_(pa.string())), ("difficulty", difficulty),
        ("image_name", pa.string()), ("timeout_s", pa.float32()), ("start_sha256", pa.string()),
        ("created_at", pa.timestamp("us", tz="UTC")), ("steering", steering), ("language", pa.string()),
        ("schema_version", pa.int32()),
    ])
    envs = pa.schema([
        ("env_id", pa.string()), ("repo", pa.string()), ("source", pa.string()), ("base_commit", pa.string()),
        ("python", pa.string()), ("install", pa.list_(pa.list_(pa.string()))), ("test_cmd", pa.list_(pa.string())),
        ("package_dirs", pa.list_(pa.string())), ("snapshot", pa.binary()), ("lock", pa.list_(pa.string())),
        ("license", pa.string()), ("language", pa.string()),
        ("install_files", pa.list_(pa.struct([("path", pa.string()), ("text", pa.string())]))),
        ("schema_version", pa.int32()),
    ])
    return {"DIFFICULTY": difficulty, "STEERING": steering, "TASK_SCHEMA": tasks, "ENV_SCHEMA": envs}


def __getattr__(name: str):
    # The schemas need pyarrow, which `featdel --help` must not import: built on first use.
    if name in ("DIFFICULTY", "STEERING", "TASK_SCHEMA", "ENV_SCHEMA"):
        value = _schemas()[name]
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class TaskRow:
    """One row of `tasks/*.parquet`, typed (docs/format.md). `difficulty` and `steering` stay
    dicts: their fields are the structs above, read by name by the curriculum."""

    instance_id: str
    repo: str
    source: str
    base_commit: str
    environment_setup_commit: str
    env_id: str
    patch: str
    deletion_patch: str
    test_patch: str
    problem_statement: str
    hints_text: str
    FAIL_TO_PASS: list[str]
    PASS_TO_PASS: list[str]
    test_cmd: list[str]
    strategy: str
    deleted_symbols: list[str]
    difficulty: dict
    image_name: str
    timeout_s: float
    start_sha256: str
    created_at: object = None  # datetime (UTC)
    steering: dict | None = None
    language: str = "python"  # "python", "javascript" or "typescript"; a shard without the column is Python's
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_row(cls, row: dict) -> TaskRow:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in row.items() if k in names and not (k == "language" and v is None)})

    def as_row(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class EnvRow:
    """One row of `envs/*.parquet`, typed."""

    env_id: str
    repo: str
    base_commit: str
    python: str
    install: list[list[str]]
    test_cmd: list[str]
    package_dirs: list[str]
    snapshot: bytes = dataclasses.field(repr=False)
    lock: list[str] = dataclasses.field(default_factory=list)
    source: str = ""
    license: str = "unknown"
    language: str = "python"
    # Files the install read besides the tree, {"path", "text"} each, relative to the env root:
    # a JavaScript env's package.json, its lock (npm's, resolved at mine time when the tree had
    # none) and .npmrc. Python's lock is `lock`; its rows have none.
    install_files: list[dict] = dataclasses.field(default_factory=list)
    schema_version: int = SCHEMA_VERSION

    @classmethod
    def from_row(cls, row: dict) -> EnvRow:
        return cls(env_id=row["env_id"], repo=row["repo"], base_commit=row["base_commit"], python=row["python"],
                   install=[list(a) for a in row["install"]], test_cmd=list(row["test_cmd"]),
                   package_dirs=list(row["package_dirs"]), snapshot=row["snapshot"],
                   lock=list(row.get("lock") or []), source=row.get("source") or "",
                   license=row.get("license") or "unknown", language=row.get("language") or "python",
                   install_files=[{"path": f["path"], "text": f["text"]} for f in row.get("install_files") or []],
                   schema_version=row.get("schema_version") or SCHEMA_VERSION)

    def recipe(self) -> Recipe:
        return from_dict(Recipe, {"python": self.python, "install": self.install, "test_cmd": self.test_cmd,
                                  "package_dirs": self.package_dirs, "lock": self.lock})


def write(folder: Path, stem: str, rows: list[dict], schema: pa.Schema) -> None:
    """Replace `folder`'s `stem-*.parquet` with `rows`, `SHARD_ROWS` a file, in `schema`."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob(f"{stem}-*.parquet"):
        old.unlink()
    rows = [{**r, "schema_version": SCHEMA_VERSION} for r in rows]
    for i in range(0, max(len(rows), 1), SHARD_ROWS):
        table = pa.Table.from_pylist(rows[i : i + SHARD_ROWS], schema=schema)
        pq.write_table(table, folder / f"{stem}-{i // SHARD_ROWS:05d}.parquet")


def _read(folder: Path, schema: pa.Schema, what: str) -> pa.Table:
    import pyarrow.parquet as pq

    if not folder.is_dir() or not any(folder.glob("*.parquet")):
        raise RunDirError(f"no {what} shards in {folder}: run `featdel package` there, or `featdel fetch` a dataset")
    return pq.read_table(folder, schema=schema)


def read_tasks(run_dir: Path) -> pa.Table:
    """The run's task shards as one Arrow table (`TASK_SCHEMA`)."""
    return _read(Path(run_dir) / "tasks", __getattr__("TASK_SCHEMA"), "task")


def read_envs(run_dir: Path) -> pa.Table:
    """The run's env shards as one Arrow table (`ENV_SCHEMA`)."""
    return _read(Path(run_dir) / "envs", __getattr__("ENV_SCHEMA"), "env")


def task_rows(run_dir: Path) -> list[TaskRow]:
    return [TaskRow.from_row(r) for r in read_tasks(run_dir).to_pylist()]


def env_rows(run_dir: Path, only: str | None = None) -> list[EnvRow]:
    """The run's env rows, or only the one named `only` (a one-line error when it is not there)."""
    rows = [EnvRow.from_row(r) for r in read_envs(run_dir).to_pylist()]
    if only is not None:
        rows = [r for r in rows if r.env_id == only]
        if not rows:
            raise RunDirError(f"no environment {only} in {run_dir}/envs")
    return rows

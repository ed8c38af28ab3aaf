"""`featdel export --format skyrl`: SkyRL's mini-swe-agent dataset, from the SWE-bench rows.

In: a packaged run directory. Out: `OUT/train.parquet` and `OUT/validation.parquet`, one row per
task in the shape SkyRL's `examples/train/mini_swe_agent` reads (its `preprocess_swegym.py`
writes the same columns for SWE-Gym):

    data_source  "featdel/<run name>" (SkyRL groups its eval metrics by it)
    prompt       [{"role": "user", "content": problem_statement}] (only its length is checked)
    env_class    "null"
    instance     the SWE-bench row: instance_id, repo, base_commit, problem_statement, patch,
                 test_patch, FAIL_TO_PASS and PASS_TO_PASS as JSON strings (as SWE-bench's own
                 dataset stores them), image_name, eval_script, version, hints_text, created_at

At run time SkyRL starts `instance.image_name` (the task's start-state image, built by
`featdel env build RUN --sandbox docker --tasks`), lets the agent edit /testbed, takes
`git diff`, and for the reward starts a fresh container of the same image, `git apply`s the
diff in /testbed and runs `bash <<'EOF'\\n{eval_script}\\nEOF`: reward 1 when it exits 0. featdel's
eval script exits 0 exactly when the task resolves, so the reward is featdel's verdict.

Why SkyRL and not verl: verl has no maintained SWE-agent dataset (its recipe was removed, a
later one never merged), while SkyRL's example is documented and maintained (docs/interop.md).

Validation: every tenth task by a hash of its id (at least one when there are two or more), so
the split is the same on every export of the same run.
"""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

from featdel.interop.exported import Exported, write_atomic
from featdel.interop.swebench import rows as swebench_rows

INSTANCE_KEYS = ("instance_id", "repo", "base_commit", "problem_statement", "patch", "test_patch",
                 "FAIL_TO_PASS", "PASS_TO_PASS", "image_name", "eval_script", "version", "hints_text", "created_at")


def row(swebench: dict, data_source: str) -> dict:
    instance = {k: swebench[k] for k in INSTANCE_KEYS}
    instance["FAIL_TO_PASS"] = json.dumps(instance["FAIL_TO_PASS"])
    instance["PASS_TO_PASS"] = json.dumps(instance["PASS_TO_PASS"])
    return {"data_source": data_source, "prompt": [{"role": "user", "content": swebench["problem_statement"]}],
            "env_class": "null", "instance": instance}


def split(ids: list[str]) -> set[str]:
    """The validation ids: every tenth by hash, at least one of two or more."""
    ranked = sorted(ids, key=lambda i: hashlib.sha256(i.encode()).hexdigest())
    return set(ranked[:max(len(ids) // 10, 1 if len(ids) >= 2 else 0)])


def export(run_dir: Path, out: Path) -> Exported:
    import pyarrow as pa
    import pyarrow.parquet as pq

    data, left_out = swebench_rows(run_dir)  # the same tasks SWE-bench's rows can hold
    source = f"featdel/{Path(run_dir).resolve().name}"
    held_out = split([r["instance_id"] for r in data])
    for name, part in (("train", [r for r in data if r["instance_id"] not in held_out]),
                       ("validation", [r for r in data if r["instance_id"] in held_out])):
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist([row(r, source) for r in part], schema=_schema()), buf)
        write_atomic(out / f"{name}.parquet", buf.getvalue())
    return Exported(written=len(data), left_out=left_out)


def _schema():
    import pyarrow as pa

    return pa.schema([
        ("data_source", pa.string()),
        ("prompt", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("env_class", pa.string()),
        ("instance", pa.struct([(k, pa.string()) for k in INSTANCE_KEYS])),
    ])

"""Run SWE-bench's own harness (swebench 5.0.2, `python -m swebench.harness.run_evaluation`) on
exported rows: the tests and bench/real_clients.py use it to check featdel's exports against the
real client, never against featdel's reading of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def predictions(rows: list[dict], model: str, patch_of) -> list[dict]:
    return [{"instance_id": r["instance_id"], "model_name_or_path": model, "model_patch": patch_of(r)} for r in rows]


def run_harness(rows_jsonl: Path, preds: list[dict], workdir: Path, run_id: str, *, timeout: int = 900) -> dict:
    """The harness's run report ({resolved_ids, unresolved_ids, error_ids, ...}) for one model's
    predictions; its logs stay under `workdir/logs/run_evaluation/<run_id>`."""
    workdir.mkdir(parents=True, exist_ok=True)
    [model] = {p["model_name_or_path"] for p in preds}
    path = workdir / f"{run_id}.preds.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in preds))
    done = subprocess.run([sys.executable, "-m", "swebench.harness.run_evaluation", "-d", str(rows_jsonl),
                           "-p", str(path), "-id", run_id, "--max_workers", "2", "-t", "600"],
                          cwd=workdir, capture_output=True, text=True, timeout=timeout)
    report = workdir / f"{model}.{run_id}.json"
    assert done.returncode == 0 and report.exists(), done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(report.read_text())


def test_output(workdir: Path, run_id: str, model: str, instance_id: str) -> str:
    return (workdir / "logs/run_evaluation" / run_id / model / instance_id / "test_output.txt").read_text()

"""The attempts store loses nothing when several processes write at once, never counts a
`broken` attempt as a failure, and adds nothing when the same results are recorded twice.

Real DuckDB files and real processes (each `store.add` opens the file, writes one transaction
and closes it; a process that finds the lock taken retries).
"""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

from featdel.core import store


def _writer(path: str, worker: int, batches: int, per_batch: int) -> None:
    for b in range(batches):
        store.add(Path(path), [
            store.Attempt(instance_id=f"task-{i % 7}", learner=f"w{worker}", round=b, reward=float(i % 2),
                          status="resolved" if i % 2 else "unresolved", attempt_id=f"{worker}-{b}-{i}")
            for i in range(per_batch)])


def test_concurrent_writer_processes_lose_nothing(tmp_path):
    db = tmp_path / "curriculum.duckdb"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(db), w, 6, 5)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    rows = store.attempts(db)
    assert len(rows) == 4 * 6 * 5
    assert {r.learner for r in rows} == {"w0", "w1", "w2", "w3"}


def _results_file(path: Path) -> Path:
    rows = [
        {"instance_id": "a", "status": "resolved", "reward": 1.0, "seconds": 1.5, "model_name_or_path": "m"},
        {"instance_id": "a", "status": "broken", "reward": 0.0, "seconds": 0.1, "model_name_or_path": "m"},
        {"instance_id": "a", "status": "unresolved", "reward": 0.0, "seconds": 2.5, "model_name_or_path": "m"},
        {"instance_id": "b", "status": "broken", "reward": 0.0, "seconds": 0.2, "model_name_or_path": "m"},
        {"instance_id": "b", "status": "patch_failed", "reward": 0.0, "seconds": 0.3, "model_name_or_path": "m"},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_broken_is_never_a_failure_and_recording_twice_adds_nothing(tmp_path):
    db = tmp_path / "c.duckdb"
    results = _results_file(tmp_path / "results.jsonl")
    assert store.add(db, store.from_results(results, "L", round=0)) == 5
    assert store.add(db, store.from_results(results, "L", round=3)) == 0
    out = store.outcomes(db, learner="L")
    assert (out["a"].successes, out["a"].trials, out["a"].broken) == (1.0, 2, 1)
    assert (out["b"].successes, out["b"].trials, out["b"].broken) == (0.0, 1, 1)
    assert store.by_round(db, learner="L") == [("a", 0, 1.0, 2), ("b", 0, 0.0, 1)]
    assert store.outcomes(db, learner="other") == {}

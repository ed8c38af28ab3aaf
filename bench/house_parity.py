"""Same verdicts and rewards before and after a refactor: one canonical record of a small run.

Runs the public commands only (so the same script works on any layout): `featdel run` on the
default corpus, `featdel evaluate` with each task's gold patch and with an empty patch, and two
`featdel train --preset debug` steps. It writes one JSON file of what must not change: every
verdict (status, F2P, P2P), every task's gold and no-op status and reward, and the rewards the
trainer recorded. Compare two such files with `--compare A B`.

    python bench/house_parity.py --out /tmp/parity_after.json
    python bench/house_parity.py --compare bench/results/house_parity_before.json /tmp/parity_after.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def featdel(*args: str) -> None:
    subprocess.run([sys.executable, "-c", "import sys; from featdel.cli.main import app; sys.argv[0] = 'featdel'; app()",
                    *args], check=True)


def record(work: Path) -> dict:
    run = work / "run"
    featdel("run", "--corpus", "corpora/default.toml", "--out", str(run), "--max-candidates", "6", "--seed", "0")
    verdicts = sorted(
        (json.loads(line) for line in (run / "verdicts.jsonl").read_text().splitlines() if line.strip()),
        key=lambda v: v["deletion_id"])
    import pyarrow.parquet as pq
    tasks = pq.read_table(run / "tasks").to_pylist()
    out: dict = {"verdicts": [{k: v.get(k) for k in ("deletion_id", "status", "stage", "FAIL_TO_PASS", "PASS_TO_PASS")}
                              for v in verdicts]}
    for name, patch_of in (("gold", lambda t: t["patch"]), ("noop", lambda t: "")):
        preds = work / f"{name}.jsonl"
        preds.write_text("".join(json.dumps({"instance_id": t["instance_id"], "model_patch": patch_of(t),
                                             "model_name_or_path": name}) + "\n" for t in tasks))
        results = work / f"{name}_results.jsonl"
        featdel("evaluate", "--tasks", str(run), "--predictions", str(preds), "--out", str(results))
        rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
        out[name] = sorted([r["instance_id"], r["status"], r["reward"]] for r in rows)
    featdel("train", "--tasks", str(run), "--preset", "debug", "--steps", "2", "--out", str(work / "ckpt"), "--seed", "0")
    import duckdb
    con = duckdb.connect(str(run / "curriculum.duckdb"), read_only=True)
    out["train"] = sorted(map(list, con.execute("select instance_id, round, reward, status from attempts").fetchall()))
    return out


def normalised(record: dict) -> dict:
    """The one intended change of the layered refactor: a strategy's refusal was spelled
    `rejected` at stage `delete`, and is its own status `refused` now."""
    for v in record["verdicts"]:
        if v["status"] == "rejected" and v["stage"] == "delete":
            v["status"] = "refused"
    return record


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path)
    p.add_argument("--compare", nargs=2, type=Path)
    p.add_argument("--work", type=Path, help="keep the run here (default: a temporary directory)")
    a = p.parse_args()
    if a.compare:
        x, y = (normalised(json.loads(f.read_text())) for f in a.compare)
        same = True
        for key in sorted(set(x) | set(y)):
            ok = x.get(key) == y.get(key)
            same &= ok
            print(f"{key:14} {'same' if ok else 'DIFFERENT'} ({len(x.get(key) or [])} vs {len(y.get(key) or [])})")
        sys.exit(0 if same else 1)
    if a.work:
        a.work.mkdir(parents=True)
        result = record(a.work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = record(Path(tmp))
    a.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {a.out}: {len(result['verdicts'])} verdicts, {len(result['gold'])} tasks")


if __name__ == "__main__":
    main()

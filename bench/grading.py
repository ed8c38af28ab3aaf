"""Grading throughput at -j 1 and -j 2, and whole-baseline P2P against sampled P2P, side by side.

Runs `featdel run` for SOURCES into DIR (reused when it exists, so a rerun resumes), then:
  1. builds predictions from the packaged tasks (the gold `patch`, the empty patch, and the
     deleted symbols back around a `pass` body; a model name per kind) cycled to N, and grades
     them with `featdel.grading.evaluate.evaluate` at -j 1 and -j 2 (a fresh results file each pass, in
     the order 1 2 2 1 after a warm-up, so that load from elsewhere falls on both alike):
     predictions per minute for each and the ratio j2/j1;
  2. grades each task's gold patch with its PASS_TO_PASS (the whole stable passing baseline) and
     with only the P2P verification used to sample (`featdel.pipeline.gates.select_tests`: coverage-tied tests
     plus a seeded 20 others, within the task's P2P), in the order whole sampled sampled whole.
     All must resolve. Prints sandbox test-run seconds (and whole grading seconds) of each mode,
     the ratio whole/sampled and the mean P2P count. Only the ratios travel to other machines.

    .venv/bin/python bench/grading.py SOURCES... [--out DIR] [--max-candidates N] [--predictions N]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from featdel.code import trees
from featdel.core.records import Deletion
from featdel.core.rundir import RunDir
from featdel.core.shards import read_tasks
from featdel.deletion import quality
from featdel.grading.evaluate import evaluate, load_tasks
from featdel.grading.grade import GradeStatus, GradeTask, grade
from featdel.pipeline.context import RepoContext
from featdel.pipeline.gates import select_tests
from featdel.pipeline.verify import VerifyOptions
from featdel.sandboxes import get_backend


def pass_body_patch(task: GradeTask, deletion: Deletion, tmp: Path) -> str | None:
    """Start state -> the deleted symbols back around `pass`; None where there is no such
    variant (a removed file)."""
    original = trees.extract(task.snapshot, tmp / f"orig-{task.instance_id}")
    stubs = [v for v in quality.stub_variants(original, deletion) if v.label == "pass"]
    return trees.diff_states(task.snapshot, deletion.files, stubs[0].files) if stubs else None


def build_predictions(base: list[tuple[str, str, str]], n: int) -> list[dict]:
    """(kind, instance_id, patch) cycled to n. A later round's model name carries the round, so no
    two predictions share (model, instance): each gets its own log folder, even graded at once."""
    out = []
    for i in range(n):
        kind, iid, patch = base[i % len(base)]
        rnd = i // len(base)
        out.append({"instance_id": iid, "model_patch": patch, "kind": kind,
                    "model_name_or_path": f"bench-{kind}" + (f"-r{rnd}" if rnd else "")})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="+")
    ap.add_argument("--out", type=Path, default=Path("runs/bench-grading"))
    ap.add_argument("--max-candidates", type=int, default=4)
    ap.add_argument("--predictions", type=int, default=60)
    args = ap.parse_args()
    run_dir, bench = args.out, args.out / "bench-grading"
    cmd = [sys.executable, "-m", "featdel.cli.main", "run", *args.sources, "--out", str(run_dir),
           "--max-candidates", str(args.max_candidates)]
    if subprocess.run(cmd, timeout=4 * 3600, check=False).returncode != 0:
        raise SystemExit(f"featdel run failed: {' '.join(cmd)}")
    shutil.rmtree(bench, ignore_errors=True)
    bench.mkdir(parents=True)
    backend = get_backend("local")
    rows = read_tasks(run_dir).to_pylist()
    if not rows:
        raise SystemExit(f"no tasks were packaged in {run_dir}: nothing to grade")
    tasks = load_tasks(run_dir, bench)
    unusable = {i: t for i, t in tasks.items() if isinstance(t, str)}
    if unusable:
        raise SystemExit(f"tasks that cannot be graded here: {unusable}")
    deletions = {d.deletion_id: d for d in RunDir(run_dir).deletions()}
    base = []
    for row in rows:
        iid = row["instance_id"]
        stub = pass_body_patch(tasks[iid], deletions[iid], bench)
        base += [("gold", iid, row["patch"]), ("empty", iid, "")] + ([("pass-body", iid, stub)] if stub else [])
    preds = build_predictions(base, args.predictions)
    kind_of = {p["model_name_or_path"]: p["kind"] for p in preds}
    preds_path = bench / "predictions.jsonl"
    preds_path.write_text("".join(json.dumps(p) + "\n" for p in preds))

    for task in tasks.values():  # warm-up: the first gradings pay for cold caches, not for -j
        grade(task, "", backend)

    # 1. throughput: the same predictions at -j 1 and -j 2, in the order 1 2 2 1 so that a burst of
    # load from elsewhere on the machine falls on both alike
    speed = {1: [0, 0.0, []], 2: [0, 0.0, []]}  # jobs -> [graded, seconds, per-grading seconds]
    statuses: dict[tuple[str, str], list[str]] = {}  # (model, instance) -> its status in each pass
    for rnd, jobs in enumerate((1, 2, 2, 1)):
        results = bench / f"results-j{jobs}-{rnd}.jsonl"
        start = time.monotonic()
        graded = evaluate(run_dir, preds_path, results, backend, jobs=jobs)
        speed[jobs][0] += len(graded)
        speed[jobs][1] += time.monotonic() - start
        speed[jobs][2] += [r.seconds for r in graded]
        for r in graded:
            statuses.setdefault((r.model_name_or_path, r.instance_id), []).append(r.status.value)

    # 2. gold graded with the whole passing baseline as P2P and with verification's old sample,
    # per task in the order whole sampled sampled whole
    records = {r.name: r for r in RunDir(run_dir).mined()}
    contexts: dict[str, RepoContext] = {}
    p2p: dict[str, list] = {"whole": [0, 0.0, 0.0], "sampled": [0, 0.0, 0.0]}  # P2P tests, test-run s, grade s
    failed = []
    for row in rows:
        iid, task = row["instance_id"], tasks[row["instance_id"]]
        if row["repo"] not in contexts:
            contexts[row["repo"]] = RepoContext.load(run_dir, records[row["repo"]])
        tied, sample = select_tests(contexts[row["repo"]], deletions[iid], VerifyOptions())
        chosen = set(tied) | set(sample)
        modes = {"whole": task, "sampled": dataclasses.replace(
            task, pass_to_pass=[t for t in task.pass_to_pass if t in chosen])}
        for rnd, mode in enumerate(("whole", "sampled", "sampled", "whole")):
            folder = bench / "p2p" / f"{mode}-{rnd}" / iid
            result = grade(modes[mode], task.gold_patch, backend, out_dir=folder)
            test_s = json.loads((folder / "report.json").read_text()).get("seconds", 0.0)
            p2p[mode] = [a + b / 2 for a, b in zip(p2p[mode], (len(modes[mode].pass_to_pass), test_s, result.seconds))]
            failed += [(mode, iid, result.status.value)] if result.status != GradeStatus.RESOLVED else []

    print(f"\nfeatdel grading benchmark, {datetime.datetime.now().isoformat(timespec='seconds')}, "
          f"{os.cpu_count()} cores ({len(os.sched_getaffinity(0))} usable), local sandbox")
    per_repo = Counter(r["repo"] for r in rows)
    print(f"tasks: {len(rows)} ({', '.join(f'{k} {v}' for k, v in per_repo.items())}); predictions: {len(preds)} "
          f"({', '.join(f'{k} {v}' for k, v in Counter(p['kind'] for p in preds).items())})"
)
    print(f"\n{'jobs':<6}{'graded':>8}{'seconds':>10}{'per minute':>12}{'median s each':>15}   (two passes each)")
    for jobs, (n, secs, each) in speed.items():
        print(f"-j {jobs:<3}{n:>8}{secs:>10.1f}{60 * n / secs:>12.1f}{statistics.median(each):>15.2f}")
    (n1, s1, _), (n2, s2, _) = speed[1], speed[2]
    same = sum(len(set(v)) == 1 for v in statuses.values())
    print(f"predictions per minute, -j 2 / -j 1: {(n2 / s2) / (n1 / s1):.2f}x; "
          f"same status in all four passes: {same}/{len(statuses)}")
    outcome = Counter((kind_of[m], v[0]) for (m, _), v in statuses.items())
    print("statuses in the first pass: " + "; ".join(f"{k} {s} {c}" for (k, s), c in sorted(outcome.items())))

    print(f"\n{'P2P':<9}{'tasks':>6}{'mean P2P':>10}{'test-run s':>12}{'grade s':>9}   (seconds: sums over tasks of the mean of two gradings)")
    for mode, (n, test_s, grade_s) in p2p.items():
        print(f"{mode:<9}{len(rows):>6}{n / len(rows):>10.1f}{test_s:>12.2f}{grade_s:>9.2f}")
    (wn, wt, wg), (sn, st, sg) = p2p["whole"], p2p["sampled"]
    print(f"whole / sampled: test-run seconds {wt / st:.2f}x, grading seconds {wg / sg:.2f}x, P2P tests {wn / sn:.1f}x")
    if failed:
        print(f"NOT RESOLVED (the P2P comparison is void): {failed}; logs under {bench / 'p2p'}")
        raise SystemExit(1)
    print(f"every gold grading resolved ({4 * len(rows)})")


if __name__ == "__main__":
    main()

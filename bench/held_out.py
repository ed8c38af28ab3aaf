"""Held-out variants on packaged tasks: how many F2P tests get one, what they cost, what they catch.

    .venv/bin/python bench/held_out.py RUN_DIR [RUN_DIR ...] [--limit N] [--sandbox local|docker]

For each task of each run (a `featdel run` or `featdel package` output whose envs are built on
this machine), side by side in one pass, in the order with, without, without, with:
- the gold patch graded with the held-out variants (featdel.grading.grade's default) and without
  them (`held_out=False`): both must resolve; the seconds of each, and the ratio;
- the empty patch graded with them: it must not resolve.
Then prints, per run and in all: tasks, F2P tests, F2P tests that got a held-out pair (a
`held_out` copy and its `perturbed` twin, read from the grader's canaries.json), tasks with at
least one, gold resolved in each mode, empty resolved, and grading seconds with/without.
Only the ratio travels to other machines.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def one_run(run_dir: Path, backend, limit: int | None, tmp: Path) -> Counter:
    from featdel.grading.evaluate import load_tasks
    from featdel.grading.grade import GradeStatus, grade

    tasks = {k: v for k, v in load_tasks(run_dir, tmp, backend=backend).items() if not isinstance(v, str)}
    got: Counter = Counter()
    for n, (iid, task) in enumerate(sorted(tasks.items())[:limit]):
        results = {}
        for mode in ("with", "without", "without", "with"):
            out = tmp / f"{iid}-{mode}"
            start = time.perf_counter()
            results.setdefault(mode, []).append(grade(task, task.gold_patch, backend, out_dir=out,
                                                      held_out=mode == "with"))
            got[f"seconds {mode}"] += time.perf_counter() - start
        planted = json.loads((tmp / f"{iid}-with" / "canaries.json").read_text())
        paired = {c["original"] for c in planted if c["kind"] == "held_out"}
        empty = grade(task, "", backend)
        got["tasks"] += 1
        got["f2p"] += len(task.fail_to_pass)
        got["f2p held out"] += len(paired)
        got["tasks held out"] += bool(paired)
        got["held-out copies"] += sum(c["kind"] == "held_out" for c in planted)
        for mode, rs in results.items():
            got[f"gold resolved {mode}"] += all(r.status == GradeStatus.RESOLVED for r in rs)
        got["empty resolved"] += empty.status == GradeStatus.RESOLVED
        bad = [r for rs in results.values() for r in rs if r.status != GradeStatus.RESOLVED]
        print(f"  [{n + 1}/{min(len(tasks), limit or len(tasks))}] {iid}: {len(paired)}/{len(task.fail_to_pass)} F2P "
              f"held out" + (f"; gold {bad[0].status}: {bad[0].reason[:160]}" if bad else ""), flush=True)
    return got


def report(label: str, got: Counter) -> None:
    t, f = got["tasks"], got["f2p"]
    ratio = got["seconds with"] / got["seconds without"] if got["seconds without"] else float("nan")
    print(f"{label}: {t} tasks, {f} F2P tests; held out: {got['f2p held out']} F2P tests "
          f"({100 * got['f2p held out'] / max(f, 1):.0f}%) in {got['tasks held out']} tasks "
          f"({100 * got['tasks held out'] / max(t, 1):.0f}%), {got['held-out copies']} copies; "
          f"gold resolved {got['gold resolved with']}/{t} with, {got['gold resolved without']}/{t} without; "
          f"empty resolved {got['empty resolved']}/{t}; grading s with/without "
          f"{got['seconds with']:.1f}/{got['seconds without']:.1f} = {ratio:.2f}x")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, default=None, help="tasks per run")
    parser.add_argument("--sandbox", default="local")
    args = parser.parse_args()
    from featdel.sandboxes import get_backend

    backend = get_backend(args.sandbox)
    total: Counter = Counter()
    for run_dir in args.runs:
        print(f"{run_dir}:", flush=True)
        with tempfile.TemporaryDirectory(prefix="held-out-bench-") as tmp:
            got = one_run(run_dir, backend, args.limit, Path(tmp))
        report(f"  {run_dir.name}", got)
        total += got
    if len(args.runs) > 1:
        report("all", total)
    return 0 if total["gold resolved with"] == total["tasks"] and not total["empty resolved"] else 1


if __name__ == "__main__":
    sys.exit(main())

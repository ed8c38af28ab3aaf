"""Verification's test runs as they are against as they were: the original's bytecode reused
(featdel.env.bytecode), failures reported in one line (`Language.quiet_args`) and the build
check's run taking the first selection (featdel.pipeline.gates.builds), or none of them; or
with `--factor zygote`, test runs forked from a warm pytest (featdel.env.zygote) or started fresh.

Takes a run directory that has deletions (any `featdel run` or `featdel delete` output) and
verifies each deletion twice in one process, alternating which mode goes first so that load from
elsewhere falls on both alike: "before" (`VerifyOptions(bytecode=False, tracebacks=True,
merge_first_run=False)`: every run compiles the tree, pytest formats a traceback per failure, and
the build check and the first run are two processes) and "now" (the defaults). `--factor
bytecode`, `--factor tracebacks`, `--factor merge` or `--factor zygote` turns back only that one. The one collection per
repository that makes the bytecode is timed apart and charged to "now". Prints, per repository
and in all: candidates, sandbox test-seconds and wall seconds per mode, their ratios, and
whether every verdict agrees (status, rule, F2P, P2P); any disagreement is printed.

    .venv/bin/python bench/verify_speed.py RUN_DIR [--limit 40] [--repos NAME ...] [--factor all]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from pathlib import Path

from featdel.core.rundir import RunDir
from featdel.pipeline.context import RepoContext
from featdel.pipeline.verify import VerifyOptions, verify_one
from featdel.sandboxes import get_backend


def key(v) -> tuple:
    return v.status, v.rule, tuple(v.FAIL_TO_PASS), tuple(v.PASS_TO_PASS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--limit", type=int, default=40, help="deletions at most (refused ones are skipped)")
    ap.add_argument("--repos", nargs="*", default=None)
    ap.add_argument("--factor", choices=["all", "bytecode", "tracebacks", "merge", "zygote"], default="all")
    args = ap.parse_args()
    backend = get_backend("local")
    back = {"all": dict(bytecode=False, tracebacks=True, merge_first_run=False), "bytecode": dict(bytecode=False),
            "tracebacks": dict(tracebacks=True), "merge": dict(merge_first_run=False),
            "zygote": dict(warm_pytest=False)}[args.factor]
    options = {False: VerifyOptions(**back), True: VerifyOptions()}
    rd = RunDir(args.run_dir)
    records = {r.name: r for r in rd.latest_repos().values()}
    refused = {v.deletion_id for v in rd.verdicts() if v.status == "refused"}
    todo = [d for d in rd.deletions() if d.deletion_id not in refused and (not args.repos or d.repo in args.repos)]
    todo = todo[: args.limit]
    contexts: dict[str, RepoContext] = {}
    rows = defaultdict(lambda: {"n": 0, "test": [0.0, 0.0], "wall": [0.0, 0.0], "same": 0, "harvest": 0.0})
    disagree = []
    for i, deletion in enumerate(todo):
        ctx = contexts.get(deletion.repo)
        if ctx is None:
            ctx = contexts[deletion.repo] = RepoContext.load(args.run_dir, records[deletion.repo])
            with ctx.runner(backend, warm=True) as runner:
                start = time.perf_counter()
                pycs = ctx.bytecode(runner, 600.0)
                rows[deletion.repo]["harvest"] = time.perf_counter() - start
            print(f"{deletion.repo}: {len(pycs)} pyc files from one collection in {rows[deletion.repo]['harvest']:.1f} s")
        got = {}
        for mode in ((False, True) if i % 2 == 0 else (True, False)):
            start = time.perf_counter()
            verdict = verify_one(ctx, deletion, backend, options[mode])
            got[mode] = (verdict, time.perf_counter() - start)
        row = rows[deletion.repo]
        row["n"] += 1
        for m, mode in enumerate((False, True)):
            row["test"][m] += got[mode][0].test_seconds
            row["wall"][m] += got[mode][1]
        if key(got[False][0]) == key(got[True][0]):
            row["same"] += 1
        else:
            disagree.append((deletion.deletion_id, key(got[False][0])[:2], key(got[True][0])[:2]))
        print(f"  {deletion.deletion_id:50s} {got[False][0].rule:18s} before {got[False][1]:6.1f} s  "
              f"now {got[True][1]:6.1f} s  {'same' if key(got[False][0]) == key(got[True][0]) else 'DIFFERENT'}")
    print()
    print(f"before: {options[False]}\nnow:    {options[True]}\n")
    print(f"{'repository':24s} {'cands':>5s} {'test s before':>14s} {'test s now':>11s} {'ratio':>6s} "
          f"{'wall before':>12s} {'wall now+harvest':>17s} {'ratio':>6s} {'same':>6s}")
    total = {"n": 0, "test": [0.0, 0.0], "wall": [0.0, 0.0], "same": 0, "harvest": 0.0}
    for name, row in sorted(rows.items()) + [("all", total)]:
        if name != "all":
            for k in ("n", "same", "harvest"):
                total[k] += row[k]
            for k in ("test", "wall"):
                total[k] = [a + b for a, b in zip(total[k], row[k])]
        reuse_wall = row["wall"][1] + row["harvest"]
        print(f"{name:24s} {row['n']:5d} {row['test'][0]:14.1f} {row['test'][1]:11.1f} "
              f"{row['test'][0] / max(row['test'][1], 1e-9):5.2f}x {row['wall'][0]:12.1f} {reuse_wall:17.1f} "
              f"{row['wall'][0] / max(reuse_wall, 1e-9):5.2f}x {row['same']:3d}/{row['n']}")
    for d in disagree:
        print("DISAGREE", *d)


if __name__ == "__main__":
    main()

"""The leak rule's rejections of a run, judged again by the current code.

Takes a run directory (any `featdel run` output) and, for each candidate its verification
rejected at `leak.found`, runs the gates again up to the leak rule (`parses`, `reads`,
`not_similar`, `no_leak`; no test runs) with the code checked out now. Prints, per repository and
in all, how many now pass the leak rule and where the others are found now, so a change to the
audit (featdel.code.leaks, featdel.code.exposure) is measured on real rejections. Where each
was found before is grouped as: in the start state (`start`), by a package's name in what the
sandbox shows (`name`), by lines there (`lines`).

    FEATDEL_CACHE=CACHE .venv/bin/python bench/leak_recheck.py RUN_DIR [--repos NAME ...]
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from featdel.core.rundir import RunDir
from featdel.pipeline.context import RepoContext
from featdel.pipeline.verify import VerifyOptions, verify_one
from featdel.sandboxes import get_backend


def where(reason: str) -> str:
    if "/audit/" in reason:
        return "start"
    return "name" if "another copy of the package" in reason else "lines"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--repos", nargs="*", help="only these repositories")
    args = parser.parse_args()
    rd = RunDir(args.run_dir)
    records = rd.latest_repos()
    deletions = {d.deletion_id: d for d in rd.deletions()}
    rejected = {v.deletion_id: v for v in rd.verdicts() if v.rule == "leak.found" and v.deletion_id in deletions
                and (not args.repos or v.repo in args.repos)}
    backend, contexts = get_backend("local"), {}
    counts: Counter = Counter()
    for i, (did, before) in enumerate(sorted(rejected.items()), 1):
        deletion = deletions[did]
        if deletion.repo not in contexts:
            contexts[deletion.repo] = RepoContext.load(args.run_dir, next(r for r in records.values()
                                                                         if r.name == deletion.repo))
        now = verify_one(contexts[deletion.repo], deletion, backend, VerifyOptions(), until="no_leak")
        outcome = "passes" if now.status == "verified" else now.rule
        counts[(deletion.repo, where(before.reason), outcome)] += 1
        print(f"[{i}/{len(rejected)}] {did}: {where(before.reason)} -> {outcome}"
              + ("" if outcome == "passes" else f" ({now.reason[-120:]})"), flush=True)
    print(f"\n{'repository':<26}{'found before':>14}{'now':>16}{'count':>7}")
    for (repo, before, outcome), n in sorted(counts.items()):
        print(f"{repo:<26}{before:>14}{outcome:>16}{n:>7}")
    passing = sum(n for (_, _, outcome), n in counts.items() if outcome == "passes")
    print(f"\n{passing} of {sum(counts.values())} leak.found rejections pass the leak rule now")


if __name__ == "__main__":
    main()

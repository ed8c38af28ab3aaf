"""How many libraries of a corpus mine automatically, and why each of the others does not.

Mines every source of a corpus (no per-repo help beyond what the corpus file itself says) with
the default thresholds and the local sandbox, into a run directory that resumes, then prints one
line per repository (status, tests, passing, coverage, modules left out, the reason) and the
share that mined. A repo counts as mined automatically when its status is `mined`.

    .venv/bin/python bench/mining_coverage.py [--corpus corpora/pypi.toml] [--out DIR] [-j 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from featdel.core.records import RepoStatus
from featdel.env.corpus import load
from featdel.pipeline.mine import mine
from featdel.sandboxes import get_backend


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=Path("corpora/pypi.toml"))
    parser.add_argument("--out", type=Path, default=Path("runs/mining-coverage"))
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--target", type=float, default=80.0, help="percent that should mine; exit 1 below it")
    args = parser.parse_args()
    entries = load(args.corpus)
    start = time.monotonic()

    def step(source: str, what: str) -> None:
        print(f"  {time.monotonic() - start:6.0f}s {source}: {what}", flush=True)

    records = mine(entries, args.out, backend=get_backend("local"), jobs=args.workers, on_step=step)
    print(f"\n{'repo':<24}{'status':<10}{'tests':>7}{'passed':>8}{'cover%':>8}{'left out':>9}  reason")
    for r in records:
        print(f"{r.name:<24}{r.status:<10}{r.collected:>7}{r.passed:>8}{r.coverage:>8.1f}{len(r.left_out):>9}  "
              f"{r.reason}")
        for module in r.left_out[:3]:
            print(f"{'':<24}  left out: {module}")
    mined = sum(r.status == RepoStatus.MINED for r in records)
    share = 100.0 * mined / max(len(entries), 1)
    print(f"\n{mined}/{len(entries)} mined automatically ({share:.0f}%; target {args.target:.0f}%) "
          f"in {time.monotonic() - start:.0f}s with -j {args.workers}; run directory {args.out}")
    return 0 if share >= args.target else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Verified tasks per core-hour, end to end: `featdel run` on a corpus with a cold cache.

    .venv/bin/python bench/tasks_per_core_hour.py [--corpus corpora/default.toml] [-j 2] \
        [--max-candidates 10] [--out DIR] [-- EXTRA featdel run OPTIONS]

Runs `featdel run --corpus C --out DIR/run -j J --max-candidates N` as one child process with a
new, empty FEATDEL_CACHE (environments, wheels and sdists all fetched and built inside the
measurement), then prints:

- verified tasks packaged, wall seconds, and the cores this process may use;
- verified tasks per core-hour counted as wall time x cores (an idle core counts), the figure
  the issue asks for;
- the same per CPU-hour the machine was busy during the run (`/proc/stat`: every process, so
  only on a quiet machine is that the run's own; `getrusage(RUSAGE_CHILDREN)` misses the
  sandboxed test processes, which this process never waits for);
- disk used by the environments and the run directory.

`--compare-full-suite` runs the corpus a second time with `--full-suite` (every test per
candidate, the pre-issue-22 validation) in a fresh cache, and prints the ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def du(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total


def busy_seconds() -> float:
    """CPU-seconds every core of the machine spent busy since boot (`/proc/stat`'s first line:
    user, nice, system, irq and softirq: not idle, iowait or stolen)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields[:7]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # steal is not ours


def one_run(corpus: Path, out: Path, jobs: int, candidates: int, extra: list[str]) -> dict:
    cache = out / "cache"
    shutil.rmtree(out, ignore_errors=True)
    cache.mkdir(parents=True)
    argv = [sys.executable, "-m", "featdel.cli.main", "run", "--corpus", str(corpus), "--out", str(out / "run"),
            "-j", str(jobs), "--max-candidates", str(candidates), *extra]
    env = {**os.environ, "FEATDEL_CACHE": str(cache)}
    before = busy_seconds()
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    cpu = busy_seconds() - before
    if done.returncode != 0:
        sys.exit(f"featdel run failed ({done.returncode}): {done.stderr[-2000:]}")
    tasks = sum(1 for _ in (out / "run" / "tasks").glob("*.parquet"))  # shards; rows counted below
    import pyarrow.parquet as pq

    rows = sum(pq.read_metadata(p).num_rows for p in (out / "run" / "tasks").glob("*.parquet")) if tasks else 0
    repos = {r["repo"] for p in (out / "run" / "tasks").glob("*.parquet")
             for r in pq.read_table(p, columns=["repo"]).to_pylist()}
    return {"tasks": rows, "repos": len(repos), "wall": wall, "cpu": cpu, "envs_bytes": du(cache / "envs"),
            "cache_bytes": du(cache), "run_bytes": du(out / "run"), "summary": done.stdout[-3000:]}


def report(label: str, r: dict, cores: int) -> None:
    core_hours = r["wall"] * cores / 3600
    print(f"{label}: {r['tasks']} verified tasks from {r['repos']} repositories in {r['wall']:.0f} s wall "
          f"on {cores} cores; the machine was busy {r['cpu']:.0f} CPU-seconds")
    print(f"  verified tasks per core-hour (wall x cores): {r['tasks'] / core_hours:.0f}")
    print(f"  verified tasks per busy CPU-hour:            {r['tasks'] / (r['cpu'] / 3600):.0f}")
    print(f"  disk: environments {r['envs_bytes'] / 2**20:.0f} MiB, whole cache {r['cache_bytes'] / 2**20:.0f} MiB, "
          f"run directory {r['run_bytes'] / 2**20:.1f} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=ROOT / "corpora" / "default.toml")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--max-candidates", type=int, default=10)
    parser.add_argument("--out", type=Path, default=None, help="keep the runs here (default: a temporary dir)")
    parser.add_argument("--compare-full-suite", action="store_true")
    parser.add_argument("extra", nargs="*", help="more `featdel run` options, after --")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="featdel-tph-"))
    cores = len(os.sched_getaffinity(0))
    print(f"corpus {args.corpus}, -j {args.jobs}, --max-candidates {args.max_candidates}, cold cache\n")
    fast = one_run(args.corpus, out / "selected", args.jobs, args.max_candidates, args.extra)
    print(fast["summary"])
    report("change-scoped validation (default)", fast, cores)
    if args.compare_full_suite:
        full = one_run(args.corpus, out / "full", args.jobs, args.max_candidates, [*args.extra, "--full-suite"])
        report("whole-suite validation (--full-suite)", full, cores)
        rate = lambda r: r["tasks"] / max(r["wall"], 1e-9)  # noqa: E731
        print(f"\nverified tasks per core-hour, change-scoped / whole-suite: {rate(fast) / max(rate(full), 1e-9):.2f}x")


if __name__ == "__main__":
    main()

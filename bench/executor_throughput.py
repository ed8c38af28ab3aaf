"""Verification throughput on Ray with 1 and 2 workers, on the same candidates, in one run.

Mines SOURCE (default: pypi:inflection==0.5.1) into WORK/base and deletes up to --candidates
(both resumed when WORK/base holds them), then verifies a fresh copy of that run directory per
row: a local Ray cluster of 1 CPU, one of 2 CPUs (one verification task per CPU, so 1 and 2
workers), and, for reference, the local executor with -j 1. Prints per row the cluster start
time, the verification seconds and candidates per hour, the 2-worker / 1-worker ratio, and
whether every row gave the same verdicts (status, stage, F2P, P2P).

    .venv/bin/python bench/executor_throughput.py [--work runs/executor-bench] [--candidates 6] [SOURCE ...]
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.executor import LocalExecutor, get_executor
from featdel.pipeline.mine import mine
from featdel.pipeline.verify import VerifyOptions, verify_all
from featdel.sandboxes import get_backend


def candidates(work: Path, sources: list[str], n: int, backend) -> Path:
    base = work / "base"
    mine([CorpusEntry(source=s, overrides=Overrides()) for s in sources], base, backend=backend)
    if not RunDir(base).deletions_jsonl.exists():
        delete_all(base, strategies=["body", "function"], max_candidates=n, seed=0, keep_docstrings=True,
                   check_for=lambda r: make_check(RepoContext.load(base, r), backend))
    return base


def row(base: Path, dest: Path, backend, opts: VerifyOptions, ray_cpus: int | None) -> tuple[float, float, dict]:
    """(cluster start seconds, verification seconds, verdicts) on a fresh copy of `base`."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(base, dest, ignore=shutil.ignore_patterns("verdicts.jsonl"))
    start = time.perf_counter()
    if ray_cpus:
        import ray

        ray.init(num_cpus=ray_cpus, include_dashboard=False, log_to_driver=False, logging_level="warning")
        executor = get_executor("ray")
    else:
        executor = LocalExecutor(1)
    started = time.perf_counter()
    try:
        verdicts = verify_all(dest, backend, opts, executor=executor)
    finally:
        if ray_cpus:
            ray.shutdown()
    seconds = time.perf_counter() - started
    return started - start, seconds, {v.deletion_id: (v.status, v.stage, v.FAIL_TO_PASS, v.PASS_TO_PASS)
                                      for v in verdicts}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", default=["pypi:inflection==0.5.1"])
    ap.add_argument("--work", type=Path, default=Path("runs/executor-bench"))
    ap.add_argument("--candidates", type=int, default=6, help="deletions per repository")
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--no-local", action="store_true", help="skip the local executor's reference row")
    args = ap.parse_args()

    backend = get_backend("local")
    work = args.work.resolve()
    base = candidates(work, args.sources, args.candidates, backend)
    n = len(RunDir(base).deletions())
    opts = VerifyOptions(reruns=args.reruns)
    rows = {"ray, 1 worker": 1, "ray, 2 workers": 2} | ({} if args.no_local else {"local -j 1": None})
    results = {label: row(base, work / label.replace(" ", "").replace(",", "-"), backend, opts, cpus)
               for label, cpus in rows.items()}
    print(f"{n} candidates from {', '.join(args.sources)}, reruns={args.reruns}")
    print(f"{'executor':<16}{'start s':>9}{'verify s':>10}{'cand/hour':>11}")
    for label, (start, seconds, _) in results.items():
        print(f"{label:<16}{start:>9.1f}{seconds:>10.1f}{3600 * n / seconds:>11.0f}")
    one, two = results["ray, 1 worker"][1], results["ray, 2 workers"][1]
    print(f"2 workers / 1 worker: {one / two:.2f}x candidates per hour")
    verdicts = [v for _, _, v in results.values()]
    print("verdicts agree across rows:", all(v == verdicts[0] for v in verdicts))


if __name__ == "__main__":
    main()

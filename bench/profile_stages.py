"""Where a verified task's seconds go: `featdel run`'s stages and verification's gates, timed in
one process, with the sandbox test-seconds each spent.

    .venv/bin/python bench/profile_stages.py [--corpus corpora/default.toml | SOURCE ...] \
        [--max-candidates 6] [--out DIR]

Runs mine, delete, verify and package on a fresh run directory (cold: a new FEATDEL_CACHE under
DIR unless --warm-cache), wrapping featdel's own functions to time them: in mining the checkout,
the environment build, the baseline runs and the coverage map; the delete stage; each gate of
`featdel.pipeline.gates.GATES`; packaging. Every test run (`SuiteRunner.run_suite`) adds its
seconds to the step that asked for it. Prints one row per step: wall seconds, share of the
whole, sandbox test-seconds, test runs, and seconds per verified task; then verified tasks per core-hour
(wall seconds times the cores `os.sched_getaffinity` gives).

Timing wrappers only: the run is `featdel run`'s, single process (-j 1), local sandbox.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WALL: dict[str, float] = defaultdict(float)
TESTS: dict[str, float] = defaultdict(float)
RUNS: dict[str, int] = defaultdict(int)
_NOW: list[str] = []


@contextlib.contextmanager
def step(label: str):
    """Time `label`; the time of steps inside it is its own, not the outer step's."""
    outer = _NOW[-1] if _NOW else None
    _NOW.append(label)
    start = time.perf_counter()
    try:
        yield
    finally:
        spent = time.perf_counter() - start
        WALL[label] += spent
        if outer is not None:
            WALL[outer] -= spent
        _NOW.pop()


def timed(fn, label: str):
    def wrapper(*args, **kwargs):
        with step(label):
            return fn(*args, **kwargs)
    return wrapper


def patch(module: str, name: str, label: str) -> None:
    mod = importlib.import_module(module)
    setattr(mod, name, timed(getattr(mod, name), label))


def instrument() -> None:
    from featdel.env.testrun import SuiteRunner
    from featdel.pipeline import gates

    patch("featdel.env.sources", "checkout", "mine: checkout")
    patch("featdel.env.recipe", "detect", "mine: recipe")
    patch("featdel.env.envs", "build", "mine: environment build")
    patch("featdel.pipeline.mine", "_baseline", "mine: baseline runs")
    patch("featdel.code.coverage_map", "build", "mine: coverage map")
    for i, gate in enumerate(gates.GATES):  # verify_one reads the list each time
        gates.GATES[i] = timed(gate, f"verify: {gate.__name__}")
    run_suite = SuiteRunner.run_suite

    def counted(self, *args, **kwargs):
        result = run_suite(self, *args, **kwargs)
        TESTS[_NOW[-1] if _NOW else "other"] += result.seconds
        RUNS[_NOW[-1] if _NOW else "other"] += 1
        return result

    SuiteRunner.run_suite = counted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*")
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument("--max-candidates", type=int, default=6)
    parser.add_argument("--out", type=Path, default=None, help="keep the run (and its cache) here")
    parser.add_argument("--warm-cache", action="store_true", help="use the FEATDEL_CACHE already set")
    args = parser.parse_args()
    if not args.sources and args.corpus is None:
        args.corpus = ROOT / "corpora" / "default.toml"
    out = args.out or Path(tempfile.mkdtemp(prefix="featdel-profile-"))
    if not args.warm_cache:
        os.environ["FEATDEL_CACHE"] = str(out / "cache")
    instrument()

    from featdel.env.corpus import entries
    from featdel.pipeline.mine import Thresholds
    from featdel.pipeline.package import package
    from featdel.pipeline.run import DeleteOptions, delete_stage, mine_stage, verify_stage
    from featdel.pipeline.verify import VerifyOptions
    from featdel.sandboxes import get_backend

    backend = get_backend("local")
    run_dir = out / "run"
    start = time.perf_counter()
    with step("mine: other"):
        mine_stage(entries(args.sources, args.corpus), run_dir, backend, Thresholds())
    with step("delete"):
        delete_stage(run_dir, backend, DeleteOptions(max_candidates=args.max_candidates))
    with step("verify: other"):
        verdicts = verify_stage(run_dir, backend, VerifyOptions())
    with step("package"):
        tasks, _ = package(run_dir)
    total = time.perf_counter() - start
    cores = len(os.sched_getaffinity(0))
    verified = sum(v.status == "verified" for v in verdicts)

    print(f"\nrun: {run_dir} ({len(verdicts)} candidates, {verified} verified, {tasks} tasks packaged)")
    print(f"{'step':28} {'wall s':>8} {'share':>6} {'tests s':>8} {'runs':>5} {'s / task':>9}")
    for label in sorted(WALL, key=lambda k: (k.split(":")[0] != "mine", k.split(":")[0] != "delete",
                                             k.split(":")[0] != "verify", -WALL[k])):
        per = WALL[label] / verified if verified else float("nan")
        print(f"{label:28} {WALL[label]:8.1f} {WALL[label] / total:6.1%} {TESTS.get(label, 0.0):8.1f} {RUNS.get(label, 0):5d} {per:9.1f}")
    print(f"{'total':28} {total:8.1f} {1:6.0%} {sum(TESTS.values()):8.1f} "
          f"{sum(RUNS.values()):5d} {total / verified if verified else float('nan'):9.1f}")
    rate = verified / (total * cores / 3600) if total else 0.0
    print(f"\nverified tasks per core-hour: {rate:.0f} ({verified} in {total:.0f} s on {cores} cores)")


if __name__ == "__main__":
    main()

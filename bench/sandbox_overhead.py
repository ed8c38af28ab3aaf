"""Sandbox overhead: per-command cost and whole-validation throughput of each way to run code.

Per command (`true`, median of N): plain subprocess, local (bwrap), `docker run` (a fresh
container each time) and warm `docker exec`. Per validation (a candidate tree written into the
work dir, `reset()` as between candidates, then pytest on 30 tests; median of M) with each. Backends run round-robin; printed as milliseconds and as ratios to plain
subprocess, all from this one run. The docker rows need an engine and the base image
(`featdel sandbox build --base-only`); they are skipped with a note otherwise.

Run: .venv/bin/python bench/sandbox_overhead.py [--n 30] [--m 5] [--image featdel-base:bookworm-2]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from featdel.sandboxes import Limits, SandboxSpec, get_backend
from featdel.sandboxes.images import engine_reason, image_exists

TESTS = "".join(f"def test_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n\n" for i in range(30))


def interleaved_ms(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Median milliseconds of each fn, run round-robin so that load from other processes on a
    shared machine falls on every backend alike instead of on whichever ran during a burst."""
    for fn in fns.values():
        fn()  # warm caches
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def write_candidate(work: Path) -> None:
    shutil.rmtree(work / "tests", ignore_errors=True)
    (work / "tests").mkdir()
    (work / "tests" / "test_x.py").write_text(TESTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="commands per median")
    ap.add_argument("--m", type=int, default=5, help="validations per median")
    ap.add_argument("--image", default="featdel-base:bookworm-2", help="docker image to run in")
    args = ap.parse_args()

    venv = Path(sys.prefix)
    prefix = Path(sys.base_prefix)
    pytest_argv = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    limits = Limits(timeout_s=120)
    with tempfile.TemporaryDirectory(prefix="featdel-bench-", dir="/var/tmp") as tmp, ExitStack() as stack:
        work = Path(tmp) / "work"
        work.mkdir()
        write_candidate(work)
        spec = SandboxSpec(workdir=work, readonly=(venv, prefix), limits=limits)
        local = stack.enter_context(get_backend("local").open(spec))

        def plain(argv: list[str]) -> None:
            subprocess.run(argv, cwd=work, capture_output=True, timeout=120, check=True)

        def warm(sb, reset: bool) -> Callable[[list[str]], None]:
            def run(argv: list[str]) -> None:
                if reset:
                    sb.reset()
                assert sb.run(argv).ok
            return run

        runners: dict[str, Callable[[list[str]], None]] = {"subprocess": plain, "local (bwrap)": warm(local, False)}
        resets: dict[str, Callable[[list[str]], None]] = {**runners, "local (bwrap)": warm(local, True)}
        reason = engine_reason() or (None if image_exists(args.image) else f"no image {args.image}")
        if reason is None:
            docker = get_backend("docker")
            docker.default_image = args.image

            def fresh(argv: list[str]) -> None:
                with docker.open(spec) as box:
                    assert box.run(argv).ok

            box = stack.enter_context(docker.open(spec))
            runners["docker run (fresh)"] = resets["docker run (fresh)"] = fresh
            runners["docker exec (warm)"] = warm(box, False)
            resets["docker exec (warm)"] = warm(box, True)
        else:
            print(f"(docker rows skipped: {reason})")

        def validation(run: Callable[[list[str]], None]) -> Callable[[], None]:
            return lambda: (write_candidate(work), run(pytest_argv))

        per_cmd = interleaved_ms({n: (lambda r=r: r(["true"])) for n, r in runners.items()}, args.n)
        per_val = interleaved_ms({n: validation(r) for n, r in resets.items()}, args.m)
    rows = {name: (per_cmd[name], per_val[name]) for name in runners}

    base_cmd, base_val = rows["subprocess"]
    print(f"{'backend':<20} {'per command':>12} {'ratio':>7} {'per validation':>15} {'ratio':>7} {'validations/s':>14}")
    for name, (cmd, val) in rows.items():
        print(f"{name:<20} {cmd:>10.1f}ms {cmd / base_cmd:>6.1f}x {val:>13.0f}ms {val / base_val:>6.2f}x {1000 / val:>14.2f}")


if __name__ == "__main__":
    main()

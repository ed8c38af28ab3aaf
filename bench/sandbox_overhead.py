"""Sandbox overhead: per-command cost and whole-validation throughput of each way to run code.

Per command (`true`, median of N): plain subprocess, local (bwrap), `docker run` (a fresh
container each time) and warm `docker exec`. Per validation (a candidate tree written into the
work dir, reset, then pytest on 30 tests, median of M): subprocess, local, docker exec in a warm
container with reset, and a fresh container per validation. Printed as milliseconds and as ratios
to plain subprocess, all from this one run. The docker rows need an engine and the base image
(`featdel sandbox build --base-only`); they are skipped with a note otherwise.

Run: .venv/bin/python bench/sandbox_overhead.py [--n 30] [--m 5] [--image featdel-base:bookworm]
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
from pathlib import Path

from featdel.sandboxes import Limits, SandboxSpec, get_backend
from featdel.sandboxes.images import engine_reason, image_exists

TESTS = "".join(f"def test_{i}():\n    assert sum(range({i})) == {i * (i - 1) // 2}\n\n" for i in range(30))


def median_ms(fn: Callable[[], object], n: int) -> float:
    fn()  # warm caches
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def write_candidate(work: Path) -> None:
    shutil.rmtree(work / "tests", ignore_errors=True)
    (work / "tests").mkdir()
    (work / "tests" / "test_x.py").write_text(TESTS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=30, help="commands per median")
    ap.add_argument("--m", type=int, default=5, help="validations per median")
    ap.add_argument("--image", default="featdel-base:bookworm", help="docker image to run in")
    args = ap.parse_args()

    venv = Path(sys.prefix)
    prefix = Path(sys.base_prefix)
    pytest_argv = [str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    limits = Limits(timeout_s=120)
    rows: dict[str, tuple[float, float | None]] = {}
    with tempfile.TemporaryDirectory(prefix="featdel-bench-", dir="/var/tmp") as tmp:
        work = Path(tmp) / "work"
        work.mkdir()
        write_candidate(work)

        def plain_val() -> None:
            write_candidate(work)
            subprocess.run(pytest_argv, cwd=work, capture_output=True, timeout=120, check=True)

        rows["subprocess"] = (median_ms(lambda: subprocess.run(["true"], timeout=30), args.n),
                              median_ms(plain_val, args.m))

        spec = SandboxSpec(workdir=work, readonly=(venv, prefix), limits=limits)
        with get_backend("local").open(spec) as sb:
            def local_val() -> None:
                write_candidate(work)
                sb.reset()
                assert sb.run(pytest_argv).ok

            rows["local (bwrap)"] = (median_ms(lambda: sb.run(["true"]), args.n), median_ms(local_val, args.m))

        reason = engine_reason() or (None if image_exists(args.image) else f"no image {args.image}")
        if reason is None:
            docker = get_backend("docker")
            docker.default_image = args.image

            def fresh(argv: list[str]) -> None:
                with docker.open(spec) as box:
                    assert box.run(argv).ok

            def fresh_val() -> None:
                write_candidate(work)
                fresh(pytest_argv)

            rows["docker run (fresh)"] = (median_ms(lambda: fresh(["true"]), max(5, args.n // 3)),
                                          median_ms(fresh_val, args.m))
            with docker.open(spec) as box:
                def warm_val() -> None:
                    write_candidate(work)
                    box.reset()
                    assert box.run(pytest_argv).ok

                rows["docker exec (warm)"] = (median_ms(lambda: box.run(["true"]), args.n),
                                              median_ms(warm_val, args.m))
        else:
            print(f"(docker rows skipped: {reason})")

    base_cmd, base_val = rows["subprocess"]
    print(f"{'backend':<20} {'per command':>12} {'ratio':>7} {'per validation':>15} {'ratio':>7} {'validations/s':>14}")
    for name, (cmd, val) in rows.items():
        print(f"{name:<20} {cmd:>10.1f}ms {cmd / base_cmd:>6.1f}x {val:>13.0f}ms {val / base_val:>6.2f}x {1000 / val:>14.2f}")


if __name__ == "__main__":
    main()

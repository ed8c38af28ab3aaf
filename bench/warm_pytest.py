"""What a pytest kept warm between runs could save: inside one sandbox, the same tests run N times
as a fresh `python -m pytest` each and N times as a child forked from a process that has already
imported pytest (the "zygote" a warm runner would keep), alternating.

This measured the ceiling of a lever of issue 22 before it was built: a run of a few tests costs
about twice the interpreter's and pytest's start, and a forked child skips both. featdel now
forks verification's runs from such a process (featdel.env.zygote); `bench/verify_speed.py
--factor zygote` measures that, with featdel's plugin and the zygote's reset after each run. The probe runs inside the local
sandbox (bubblewrap) with the repository's environment, on its checkout, without featdel's
plugin (both modes alike), and prints the median seconds per run and their ratio.

    .venv/bin/python bench/warm_pytest.py RUN_DIR REPO [--runs 15] [--tests 3]

RUN_DIR: a run directory with REPO mined (any `featdel run` output).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

# Runs inside the sandbox with the repository's interpreter: standard library and pytest only.
PROBE = r"""
import json, os, statistics, subprocess, sys, time
runs, tests = int(sys.argv[1]), sys.argv[2:]
args = ["-q", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
fresh, forked = [], []
import pytest  # the zygote's one import
for i in range(runs):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pytest", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    fresh.append(time.perf_counter() - t)
    t = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1), os.dup2(devnull, 2)
        os._exit(int(pytest.main(args)))
    os.waitpid(pid, 0)
    forked.append(time.perf_counter() - t)
print("WARM-PYTEST " + json.dumps({"fresh": statistics.median(fresh), "forked": statistics.median(forked)}))
"""


def main() -> None:
    from featdel.core.rundir import RunDir
    from featdel.pipeline.context import RepoContext
    from featdel.sandboxes import get_backend

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("repo")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--tests", type=int, default=3, help="how many of the baseline's passing tests each run takes")
    args = ap.parse_args()
    rd = RunDir(args.run_dir)
    record = next((r for r in rd.latest_repos().values() if r.name == args.repo), None)
    if record is None:
        raise SystemExit(f"{args.repo} is not mined in {args.run_dir}; mined: {sorted(rd.latest_repos())}")
    ctx = RepoContext.load(args.run_dir, record)
    tests = sorted(ctx.passing)[: args.tests]
    python = str(ctx.env.venv / "bin" / "python")
    with ctx.runner(get_backend("local")) as runner:
        result = runner.run([python, "-c", PROBE, str(args.runs), *tests], env=ctx.env.environ(), timeout_s=1800)
    line = next((ln for ln in result.stdout.splitlines() if ln.startswith("WARM-PYTEST ")), None)
    if line is None:
        raise SystemExit(f"the probe did not finish (exit {result.exit_code}): {result.stderr.strip()[-300:]}")
    got = json.loads(line.removeprefix("WARM-PYTEST "))
    print(f"{args.repo}: {len(tests)} tests, {args.runs} runs each way, in one sandbox")
    print(f"  fresh python -m pytest   {got['fresh']:.3f} s per run (median)")
    print(f"  forked from warm pytest  {got['forked']:.3f} s per run (median)")
    print(f"  fresh / forked           {got['fresh'] / got['forked']:.2f}x")


if __name__ == "__main__":
    main()

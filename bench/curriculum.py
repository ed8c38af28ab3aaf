"""Learnability against uniform sampling, and steered against default generation, side by side,
for a simulated learner of growing skill over the real difficulty features of packaged tasks.

In: one or more packaged run directories (their task shards). Out, printed:
  1. per round, the share of drawn tasks whose group of G attempts was informative (both passes
     and failures, 0 < p < 1 observed) under learnability sampling (`featdel curriculum sample`'s
     sampler) and under uniform sampling of the same pool, over several seeds;
  2. per round, the pass rate of newly generated tasks with steering toward the target and with
     default knobs (rounds 0-2 explore the knobs);
and a PNG of both runs when matplotlib is installed (`pip install 'featdel[plot]'`). The attempts
go to real DuckDB files in a temporary directory.

    .venv/bin/python bench/curriculum.py RUN_DIR... [--rounds 12] [--seeds 3] [--target 0.5] [--png FILE]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

from featdel.curriculum import posterior, simulate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.5)
    ap.add_argument("--png", type=Path, default=Path("curriculum_bench.png"))
    args = ap.parse_args()
    rows = [r for run in args.runs for r in posterior.task_rows(run)]
    print(f"{len(rows)} real tasks from {', '.join(map(str, args.runs))}")
    smart, plain, steered, default = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="featdel-bench-curriculum-") as tmp:
        for seed in range(args.seeds):
            smart.append(simulate.sampling_run(rows, Path(tmp) / f"l{seed}.duckdb", uniform=False,
                                               rounds=args.rounds, seed=seed))
            plain.append(simulate.sampling_run(rows, Path(tmp) / f"u{seed}.duckdb", uniform=True,
                                               rounds=args.rounds, seed=seed))
        steered = simulate.steering_run(rows, Path(tmp) / "on.duckdb", steer_on=True, target=args.target,
                                        rounds=args.rounds)
        default = simulate.steering_run(rows, Path(tmp) / "off.duckdb", steer_on=False, target=args.target,
                                        rounds=args.rounds)
    s, u = np.mean(smart, axis=0), np.mean(plain, axis=0)
    print(f"\ninformative attempt groups (0 < p < 1 observed), mean of {args.seeds} seeds")
    print(f"{'round':>5} {'learnability':>12} {'uniform':>8}")
    for i, (a, b) in enumerate(zip(s, u, strict=True)):
        print(f"{i:>5} {a:>12.2f} {b:>8.2f}")
    print(f"{'all':>5} {s.mean():>12.2f} {u.mean():>8.2f}   ratio {s.mean() / max(u.mean(), 1e-9):.2f}x")
    print(f"\npass rate of new tasks, target {args.target} (rounds 0-2 explore the knobs)")
    print(f"{'round':>5} {'steered':>8} {'default':>8} {'predicted':>9}")
    for a, b in zip(steered, default, strict=True):
        pred = f"{a.predicted:.2f}" if a.predicted is not None else "-"
        print(f"{a.round:>5} {a.pass_rate:>8.2f} {b.pass_rate:>8.2f} {pred:>9}")
    worst = max(abs(r.pass_rate - args.target) for r in steered[3:])
    print(f"steered rounds 3+: largest miss {worst:.2f}; default knobs end at {default[-1].pass_rate:.2f}")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG: matplotlib is not installed (pip install 'featdel[plot]')", file=sys.stderr)
        return 0
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.plot(s, label="learnability p(1-p)")
    left.plot(u, label="uniform")
    left.set(xlabel="round", ylabel="informative share", title="sampling", ylim=(0, 1))
    left.legend()
    right.plot([r.pass_rate for r in steered], label="steered")
    right.plot([r.pass_rate for r in default], label="default knobs")
    right.axhspan(args.target - 0.1, args.target + 0.1, color="grey", alpha=0.2)
    right.set(xlabel="round", ylabel="pass rate of new tasks", title="generation", ylim=(0, 1))
    right.legend()
    fig.tight_layout()
    fig.savefig(args.png, dpi=100)
    print(f"PNG in {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

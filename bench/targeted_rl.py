"""Targeted RL on the toy environment: the trajectory objective alone against it plus targeted hints.

In: flags (model preset, seeds, steps, k, tasks per step, warm-up size). Out, under --out: one
JSONL line per (seed, arm, step) in `steps.jsonl` (reward, both loss terms, KL, hint counts by
rule, error rates, seconds), the warm-up weights per seed, `summary.json`; with --png the
learning curves (mean and min-max over seeds, both arms).

1. Warm-up, per seed, the same weights for both arms: next-token loss on the policy tokens of
   `featdel.agent.toyenv.warmup_sequences` (a behaviour prior of plausible, mostly wrong tool
   use, plus hint-heeding examples), so the model emits calls at all. See docs/targeted_rl.md.
2. RL, per (seed, arm), from the warm-up weights, the same number of steps: each step draws
   `--tasks` fresh tasks (the same tasks for both arms of a seed), `--k` rollouts each by
   `TransformerPolicy` at temperature 1 through `toyenv.toy_episode` (the agent's own token loop,
   parser and hint rules), then one `featdel.trainer.rl.rl_step` with
   `RLConfig(hints=False)` ("trajectory") or `RLConfig(hints=True)` and a live teacher ("hints").
The learning curve is the reward of each step's own rollouts (fresh tasks every step, so it is
also a held-out measure); "final" is the mean over the last `--final-window` steps.

    .venv/bin/python bench/targeted_rl.py --seeds 0 1 2 --steps 40 --out runs/targeted_rl --png docs/targeted_rl.png
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ARMS = {"trajectory": False, "hints": True}  # arm name -> RLConfig.hints


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="debug")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--k", type=int, default=8, help="rollouts per task (one GRPO group)")
    ap.add_argument("--tasks", type=int, default=2, help="tasks per step")
    ap.add_argument("--lr", type=float, default=0.005, help="Muon lr in RL")
    ap.add_argument("--adamw-lr", type=float, default=1e-3, help="AdamW lr in RL")
    ap.add_argument("--warmup-episodes", type=int, default=600)
    ap.add_argument("--warmup-steps", type=int, default=250)
    ap.add_argument("--warmup-batch", type=int, default=8)
    ap.add_argument("--max-turns", type=int, default=5, help="turns per episode (the ideal needs 3 or 4)")
    ap.add_argument("--final-window", type=int, default=10)
    ap.add_argument("--workers", type=int, default=2, help="processes (one thread each); 1 runs in this process")
    ap.add_argument("--out", type=Path, default=Path("runs/targeted_rl"))
    ap.add_argument("--png", type=Path, default=None)
    args = ap.parse_args(argv)
    if args.steps < 1 or args.k < 2 or args.tasks < 1 or args.warmup_steps < 0 or args.max_turns < 1:
        ap.error("need --steps >= 1, --k >= 2 (a group needs two rollouts), --tasks >= 1, --warmup-steps >= 0, "
                 "--max-turns >= 1")
    return args


def pad(seqs):
    """(inputs, targets, mask) tensors, right-padded, mask on the targets that are policy tokens."""
    import torch

    width = max(len(t) for t, _ in seqs) - 1
    inputs, targets = torch.zeros(len(seqs), width, dtype=torch.long), torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.bool)
    for row, (tokens, m) in enumerate(seqs):
        n = len(tokens) - 1
        inputs[row, :n], targets[row, :n] = torch.tensor(tokens[:-1]), torch.tensor(tokens[1:])
        mask[row, :n] = torch.tensor(m[1:], dtype=torch.bool)
    return inputs, targets, mask


def warm_up(args, seed: int) -> dict:
    """Train the warm-up for `seed` and save its weights; returns its log line."""
    import torch
    from featdel.trainer.data import Batch
    from featdel.trainer.train import TrainConfig, build, train_step

    from featdel.agent.toyenv import warmup_sequences

    torch.set_num_threads(1)
    started = time.monotonic()
    seqs = warmup_sequences(args.warmup_episodes, seed=seed)
    model, opt = build(TrainConfig(model=args.preset, seed=seed))
    rng, losses = random.Random(seed), []
    for _ in range(args.warmup_steps):
        inputs, targets, mask = pad(rng.sample(seqs, min(args.warmup_batch, len(seqs))))
        losses.append(train_step(model, opt, Batch(inputs=inputs, targets=targets, mask=mask)).item())
    torch.save(model.state_dict(), args.out / f"warmup-seed{seed}.pt")
    return {"seed": seed, "warmup_sequences": len(seqs), "warmup_steps": args.warmup_steps,
            "warmup_loss_first": losses[0] if losses else None, "warmup_loss_last": losses[-1] if losses else None,
            "seconds": round(time.monotonic() - started, 1)}


def task_seed(seed: int, step: int, j: int) -> int:
    """The j-th task of a step: a pure function of (seed, step, j), so both arms see the same tasks."""
    return 1_000_000 * (seed + 1) + 1000 * step + j


def run_arm(args, seed: int, arm: str, log=None) -> list[dict]:
    """RL from the seed's warm-up weights in one arm; one metrics dict per step."""
    import dataclasses

    import torch
    from featdel.trainer.rl import RLConfig, Teacher, rl_step
    from featdel.trainer.train import TrainConfig, build

    from featdel.agent.policy import TransformerPolicy
    from featdel.agent.toyenv import TOY_CONFIG, make_task, toy_episode

    torch.set_num_threads(1)
    model, opt = build(TrainConfig(model=args.preset, seed=seed, lr=args.lr, adamw_lr=args.adamw_lr))
    path = args.out / f"warmup-seed{seed}.pt"
    if path.exists():
        model.load_state_dict(torch.load(path))
    cfg = RLConfig(hints=ARMS[arm])
    teacher = Teacher(model, cfg.teacher) if cfg.hints else None
    policy = TransformerPolicy(model, temperature=1.0)
    config = dataclasses.replace(TOY_CONFIG, max_turns=args.max_turns)
    rows = []
    for step in range(args.steps):
        t0 = time.monotonic()
        trajs = [toy_episode(make_task(task_seed(seed, step, j)), policy, config=config, rollout=i,
                             seed=task_seed(seed, step, j) * 100 + i)
                 for j in range(args.tasks) for i in range(args.k)]
        t1 = time.monotonic()
        metrics = rl_step(model, opt, trajs, cfg=cfg, teacher=teacher)
        turns = [t for traj in trajs for t in traj.turns]
        row = {"seed": seed, "arm": arm, "step": step, "reward": sum(t.reward for t in trajs) / len(trajs),
               "hints_by_rule": dict(Counter(h.rule for t in trajs for h in t.hints)),
               "hints_per_episode": sum(len(t.hints) for t in trajs) / len(trajs),
               "error_turns": sum(t.error is not None for t in turns) / max(len(turns), 1),
               "turns_per_episode": len(turns) / len(trajs),
               "submitted": sum(t.ended == "submitted" for t in trajs) / len(trajs),
               "sample_s": round(t1 - t0, 2), "train_s": round(time.monotonic() - t1, 2),
               **{k: v for k, v in metrics.items() if k != "reward_mean"}}
        rows.append(row)
        if log:
            log(row)
    return rows


def _job(job):
    args, kind, seed, arm = job
    if kind == "warmup":
        return [warm_up(args, seed)]
    out = args.out / f"steps-seed{seed}-{arm}.jsonl"
    out.unlink(missing_ok=True)

    def log(row):
        with out.open("a") as fh:
            fh.write(json.dumps(row) + "\n")

    return run_arm(args, seed, arm, log)


def main(argv=None) -> int:
    import multiprocessing as mp

    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    warm_jobs = [(args, "warmup", s, None) for s in args.seeds]
    jobs = [(args, "rl", s, a) for s in args.seeds for a in args.arms]
    if args.workers == 1:
        warm = [r for job in warm_jobs for r in _job(job)]
        rows = [r for job in jobs for r in _job(job)]
    else:
        with mp.get_context("spawn").Pool(args.workers) as pool:
            warm = [r for rs in pool.map(_job, warm_jobs) for r in rs]
            print(f"warm-up done in {time.monotonic() - started:.0f}s: {warm}", flush=True)
            rows = [r for rs in pool.map(_job, jobs, chunksize=1) for r in rs]
    with (args.out / "steps.jsonl").open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row) + "\n")
    summary = summarise(args, rows, warm, time.monotonic() - started)
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(json.dumps(summary["final"], indent=1))
    if args.png:
        plot(rows, args.png, summary)
    bad = [r for r in rows if not all(math.isfinite(r[k]) for k in ("loss", "policy", "distill"))]
    return 1 if bad else 0


def summarise(args, rows, warm, seconds: float) -> dict:
    final: dict = {}
    for arm in args.arms:
        per_seed = {}
        for seed in args.seeds:
            mine = [r["reward"] for r in rows if r["arm"] == arm and r["seed"] == seed]
            per_seed[seed] = {"first": statistics.mean(mine[: args.final_window]),
                              "final": statistics.mean(mine[-args.final_window:])}
        finals = [v["final"] for v in per_seed.values()]
        final[arm] = {"per_seed": per_seed, "mean_final": statistics.mean(finals),
                      "std_final": statistics.pstdev(finals)}
    config = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}
    return {"config": config, "command": " ".join(sys.argv), "wall_s": round(seconds, 1), "warmup": warm,
            "final": final}


def plot(rows, png: Path, summary: dict) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("no PNG: matplotlib is not installed (pip install 'featdel[plot]')", file=sys.stderr)
        return
    panels = [("reward", "reward (fresh tasks each step)"), ("error_turns", "malformed or unknown-tool turns"),
              ("hints_per_episode", "hints per episode"), ("distill", "distillation term")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4))
    for ax, (key, title) in zip(axes, panels, strict=True):
        for arm, colour in (("trajectory", "tab:blue"), ("hints", "tab:orange")):
            seeds = sorted({r["seed"] for r in rows if r["arm"] == arm})
            if not seeds:
                continue
            curves = [[r[key] for r in sorted((r for r in rows if r["arm"] == arm and r["seed"] == s),
                                              key=lambda r: r["step"])] for s in seeds]
            curves = [smooth(c) for c in curves]
            n = min(len(c) for c in curves)
            steps = range(n)
            mean = [statistics.mean(c[i] for c in curves) for i in steps]
            ax.plot(steps, mean, color=colour, label=f"{arm} ({len(seeds)} seeds)")
            ax.fill_between(steps, [min(c[i] for c in curves) for i in steps],
                            [max(c[i] for c in curves) for i in steps], color=colour, alpha=0.2)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("RL step")
    axes[0].legend(fontsize=8)
    cfg = summary["config"]
    fig.suptitle(f"Targeted RL on the toy environment: preset {cfg['preset']}, k={cfg['k']}, "
                 f"{cfg['tasks']} tasks/step; mean and min-max over seeds, moving average of 5", fontsize=9)
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def smooth(values, width: int = 5):
    return [statistics.mean(values[max(0, i - width + 1): i + 1]) for i in range(len(values))]


if __name__ == "__main__":
    sys.exit(main())

"""`featdel train`: Targeted RL on the task shards of a run.

In: a run directory with packaged tasks (and their environments in the cache), an
`RLTrainOptions` (preset, steps, seed, sandbox, output folder), and for a multi-rank run an
initialised process group (`torchrun` sets it up; see `featdel.trainer.launch`). Out, in `out/`:
- `checkpoints/step-NNNNNN/` (torch.distributed.checkpoint: model and ShardedMuon state; an
  EMA teacher's weights beside it) and `checkpoints/latest`, written after a checkpoint is whole;
- `metrics.jsonl`: one line per step (reward, both loss terms, KL to the sampling policy and to
  the teacher, hint counts, tokens per second of rollouts and of the update);
- `trajectories/step-NNNNNN.jsonl`: every rollout, token exact (`featdel.agent.trajectory`);
- attempts in the run's curriculum database (`featdel curriculum stats` reads them), learner
  `train:<out folder name>` unless named, round = step.

Each step reads top to bottom: the curriculum sampler draws tasks (rank 0 draws, every rank
gets the same list), each rank runs k rollouts of its share of them in sandboxes in parallel,
the monitor's rules zero the reward of trajectories that reach for the deleted code, one
`rl_step` updates the FSDP2-sharded model with Sharded Muon, rank 0 writes what all ranks saw.
Rollouts sample from a plain copy of the weights on each rank (synced from the shards at the
start of every step, as an inference engine would be), so sampling is local and never a
collective. The same command resumes from `checkpoints/latest`; steps after it are run again
(their trajectory files and metric lines are replaced; attempts already recorded for them stay,
keyed by learner, step, task and rollout).
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import TrainError


@dataclass(frozen=True, kw_only=True, slots=True)
class RLTrainOptions:
    tasks: Path  # a run directory with packaged tasks
    out: Path
    preset: str = "debug"
    steps: int | None = None  # default: the preset's
    seed: int = 0
    sandbox: str = "local"
    hints: bool = True
    teacher: str | None = None  # default: the preset's
    learner: str | None = None  # default: "train:<out folder name>"
    db: Path | None = None  # default: the run's curriculum.duckdb
    model_path: Path | None = None  # a local Hugging Face checkpoint, or a named model, instead of a preset model
    device: str = "cpu"

    def resume_key(self) -> dict:
        """What a resumed run must share with the run it continues (steps may grow)."""
        keep = ("tasks", "preset", "seed", "hints", "teacher", "learner", "model_path")
        return {k: str(getattr(self, k)) for k in keep}


@dataclass(frozen=True, kw_only=True, slots=True)
class RLTrainSummary:
    steps_run: int
    last_step: int
    first_reward: float | None
    last_reward: float | None
    checkpoint: Path | None
    attempts: int
    skipped_tasks: dict[str, str]


def _dist():
    import torch.distributed as dist

    return (dist.get_rank(), dist.get_world_size()) if dist.is_initialized() else (0, 1)


def _broadcast(obj, rank: int, world: int):
    if world == 1:
        return obj
    import torch.distributed as dist

    box = [obj if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def _gather(obj, world: int) -> list:
    if world == 1:
        return [obj]
    import torch.distributed as dist

    out = [None] * world
    dist.all_gather_object(out, obj)
    return out


def train_rl(opts: RLTrainOptions, *, log=print, progress: bool = True) -> RLTrainSummary:
    """Run (or resume) a training run; see the module docstring."""
    from featdel.agent.episode import EpisodeConfig, load_agent_tasks
    from featdel.core.store import default_path
    from featdel.sandboxes import get_backend
    from featdel.trainer.rl import RLConfig, with_signal
    from featdel.trainer.rl_presets import preset as get_preset

    rank, world = _dist()
    try:  # the monitor zeroes the reward of flagged rollouts: without it no reward can be trusted
        import featdel.monitor  # noqa: F401
    except ImportError as exc:
        raise TrainError(f"the trajectory monitor cannot be imported ({exc}); training will not trust rewards "
                         "without it: reinstall featdel") from None
    try:
        p = get_preset(opts.preset)
        rl_cfg = RLConfig(hints=opts.hints, teacher=opts.teacher or p.teacher)
    except ValueError as exc:
        raise TrainError(str(exc)) from None
    steps = opts.steps or p.steps
    out = Path(opts.out)
    learner = opts.learner or f"train:{out.resolve().name}"
    db = Path(opts.db) if opts.db else default_path(opts.tasks)
    if rank == 0:
        _check_options(out, opts)
    backend = get_backend(opts.sandbox)
    workdir = out / "work" / f"rank-{rank}" / "tasks"
    workdir.mkdir(parents=True, exist_ok=True)
    loaded = load_agent_tasks(Path(opts.tasks), workdir, backend=backend)
    tasks = {i: t for i, t in loaded.items() if not isinstance(t, str)}
    skipped = {i: t for i, t in loaded.items() if isinstance(t, str)}
    if not tasks:
        raise TrainError(f"no task of {opts.tasks} can run here ({len(skipped)} without an environment): "
                         "run `featdel env build` for them first")
    episode = EpisodeConfig(max_turns=p.max_turns, max_tokens=p.max_tokens, max_action_tokens=p.max_action_tokens,
                            max_observation=p.max_observation, test_timeout_s=p.test_timeout_s)
    model, opt, actor, dims, codec = _build(opts, p, world)
    teacher = _teacher(actor, rl_cfg, codec)
    start = _resume(out, model, opt, teacher, rank)
    if log and rank == 0:
        from featdel.trainer.train import git_revision

        log(f"train preset={opts.preset} {dataclasses.asdict(p)} steps={steps} world={world} start={start} "
            f"tasks={len(tasks)} learner={learner} git={git_revision()}")
    metrics_path, traj_dir = out / "metrics.jsonl", out / "trajectories"
    first = last = None
    attempts = 0
    checkpoint = None
    bar = _progress(progress and rank == 0, steps, start)
    for step in range(start, steps):
        ids = _broadcast(_draw(opts, db, learner, tasks, p.tasks_per_step, step) if rank == 0 else None, rank, world)
        _sync(model, actor, dims)
        t0 = time.monotonic()
        trajs = _rollouts([tasks[i] for i in ids[rank::world]], actor, codec, backend, p, episode, opts.seed, step)
        trajs = _monitor(trajs)
        rollout_s = time.monotonic() - t0
        t1 = time.monotonic()
        signal = sum(_gather(with_signal(trajs, hints=rl_cfg.hints), world))
        m = _update(model, opt, trajs, rl_cfg, teacher, signal)
        if rl_cfg.teacher == "ema":
            teacher.update(_full(model, dims))
        train_s = time.monotonic() - t1
        sampled = sum(sum(t.mask) for t in trajs)
        everything = _gather({"trajectories": [t.to_dict() for t in trajs], "metrics": m, "sampled": sampled,
                              "rollout_s": rollout_s, "train_s": train_s}, world)
        if rank == 0:
            row, recorded = _record(step, everything, traj_dir, metrics_path, db, learner)
            attempts += recorded
            first = row["reward_mean"] if first is None else first
            last = row["reward_mean"]
            bar(step, row)
        if (step + 1) % p.save_every == 0 or step + 1 == steps:
            checkpoint = _save(out, model, opt, teacher, step + 1, rank, world)
    bar(None, None)
    return RLTrainSummary(steps_run=max(0, steps - start), last_step=steps, first_reward=first, last_reward=last,
                          checkpoint=checkpoint, attempts=attempts, skipped_tasks=skipped)


def _check_options(out: Path, opts: RLTrainOptions) -> None:
    """Write `options.json` once; a later run in the same folder must continue the same run."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "options.json"
    key = opts.resume_key()
    if path.exists():
        old = json.loads(path.read_text())
        diff = {k: (old.get(k), v) for k, v in key.items() if old.get(k) != v}
        if diff:
            names = ", ".join(f"{k} was {a} now {b}" for k, (a, b) in diff.items())
            raise TrainError(f"{out} holds another run ({names}): use another --out, or the same options to resume")
    else:
        path.write_text(json.dumps(key, indent=2) + "\n")


def _build(opts: RLTrainOptions, p, world: int):
    """(trained model, optimizer, plain actor model for sampling, ParallelDims or None, codec or
    None for bytes)."""
    from featdel.trainer.model import Transformer
    from featdel.trainer.parallel import ParallelDims
    from featdel.trainer.train import TrainConfig, build

    if opts.model_path is not None:
        from featdel.trainer.hf import build_hf
        from featdel.trainer.pretrained import resolve

        # a named model converts on first use in a single process; ranks under torchrun would race
        path = resolve(opts.model_path, convert_missing=world == 1, log=print)
        return build_hf(path, p, world, device=opts.device, seed=opts.seed)
    cfg = TrainConfig(model=p.model, lr=p.lr, adamw_lr=p.adamw_lr, seed=opts.seed, device=opts.device)
    dims = ParallelDims(world_size=world, ep=world) if world > 1 else None
    model, opt = build(cfg, dims)
    if dims is None:
        return model, opt, model, None, None
    import torch

    with torch.device(opts.device):
        actor = Transformer(p.model).requires_grad_(False)
    return model, opt, actor, dims, None


def _full(model, dims) -> dict:
    if dims is None:
        return {n: p.detach() for n, p in model.named_parameters()}
    from featdel.trainer.train import full_parameters

    return full_parameters(model)


def _sync(model, actor, dims) -> None:
    """The actor takes the trained weights (a collective under FSDP: every rank calls it)."""
    if dims is not None:
        actor.load_state_dict(_full(model, dims), strict=False)


def _teacher(actor, cfg, codec):
    from featdel.trainer.rl import Teacher

    return Teacher(actor, cfg.teacher, decay=cfg.ema_decay, codec=codec)


def _draw(opts: RLTrainOptions, db: Path, learner: str, tasks: dict, n: int, step: int) -> list[str]:
    """`n` task ids from the curriculum sampler (learnability-weighted, retired tasks left out),
    among the tasks that can run here; repeats when there are fewer eligible tasks than `n`."""
    from featdel.curriculum import report, sampler

    stats = [s for s in report.load_stats(opts.tasks, db, learner=learner) if s.instance_id in tasks]
    seed = opts.seed * 1_000_003 + step
    ids = sampler.sample(stats, sampler.SampleOptions(n=n, seed=seed))
    if not ids:  # every task retired: keep training on all of them uniformly
        ids = sampler.sample(stats, sampler.SampleOptions(n=n, seed=seed, uniform=True)) or sorted(tasks)
    rng = random.Random(seed)
    while len(ids) < n:
        ids.append(rng.choice(ids))
    return ids


def _rollouts(my_tasks, actor, codec, backend, p, episode, seed: int, step: int) -> list:
    from featdel.agent.episode import rollouts
    from featdel.trainer.policy import TransformerPolicy

    policy = TransformerPolicy(actor, temperature=p.temperature, codec=codec)
    base = (seed * 100_003 + step) * 1009

    def one(j_task):
        j, task = j_task
        return rollouts(task, policy, backend, k=p.k, config=episode, seed=base + j * p.k)

    with ThreadPoolExecutor(max_workers=max(1, len(my_tasks)), thread_name_prefix="task") as pool:
        return [t for group in pool.map(one, enumerate(my_tasks)) for t in group]


def _monitor(trajs: list) -> list:
    """A trajectory the monitor's rules flag earns nothing (status `flagged`, the rules in `reason`).
    Broken ones are read too: a flagged attempt counts as a failure whatever the sandbox did. The
    monitor is not optional: if it cannot be imported the step fails rather than trust every reward."""
    from featdel.monitor import flag

    out = []
    for t in trajs:
        flags = flag(t)
        if flags:
            rules = sorted({f.rule for f in flags})
            t = dataclasses.replace(t, reward=0.0, status="flagged", reason=f"monitor: {', '.join(rules)}")
        out.append(t)
    return out


def _update(model, opt, trajs, cfg, teacher, signal_everywhere: int) -> dict:
    from featdel.trainer.rl import rl_step

    if not signal_everywhere:  # no rank has a reward difference or a hint: no step at all (rl.with_signal)
        return {"skipped": 1, "trajectories": len(trajs), "hints": sum(len(t.hints) for t in trajs)}
    return rl_step(model, opt, trajs, cfg=cfg, teacher=teacher)


def _record(step: int, everything: list[dict], traj_dir: Path, metrics_path: Path, db: Path, learner: str):
    """Rank 0 writes the step: trajectories, attempts, one metrics line. Returns (row, attempts added)."""
    from featdel.agent.trajectory import Trajectory, save_trajectories
    from featdel.core.store import Attempt, add

    trajs = [Trajectory.from_dict(d) for part in everything for d in part["trajectories"]]
    path = traj_dir / f"step-{step + 1:06d}.jsonl"
    path.unlink(missing_ok=True)
    save_trajectories(path, trajs)
    added = add(db, [Attempt(instance_id=t.instance_id, learner=learner, reward=t.reward, status=t.status,
                             round=step + 1, seconds=t.seconds, attempt_id=f"{learner}:{step + 1}:{t.instance_id}:"
                                                                          f"{t.rollout}:{i}")
                     for i, t in enumerate(trajs)])
    graded = [t for t in trajs if t.status != "broken"]
    parts = [p["metrics"] for p in everything]
    rollout_s = max(p["rollout_s"] for p in everything)
    train_s = max(p["train_s"] for p in everything)
    tokens = sum(p["metrics"].get("tokens", 0) for p in everything)
    row = {
        "step": step + 1,
        "reward_mean": sum(t.reward for t in graded) / len(graded) if graded else 0.0,
        "resolved": sum(t.status == "resolved" for t in trajs),
        # broken: the start state failed without the learner's patch (featdel.grading.grade); left out of the
        # loss and the pass rates, counted here and by task so a broken environment is seen
        "trajectories": len(trajs), "broken": len(trajs) - len(graded),
        "broken_tasks": sorted({t.instance_id for t in trajs if t.status == "broken"}),
        "flagged": sum(t.status == "flagged" for t in trajs),
        "skipped_update": any(p.get("skipped") for p in parts),
        **{k: _mean(parts, k) for k in ("loss", "policy", "distill", "kl_old", "kl_teacher")},
        "hints": sum(len(t.hints) for t in trajs),
        "hints_by_rule": _count(h.rule for t in trajs for h in t.hints),
        "targeted_tokens": sum(p.get("targeted_tokens", 0) for p in parts),
        "rollout_tokens_per_s": round(sum(p["sampled"] for p in everything) / max(rollout_s, 1e-9), 2),
        "train_tokens_per_s": round(tokens / max(train_s, 1e-9), 2),
        "rollout_s": round(rollout_s, 3), "train_s": round(train_s, 3),
    }
    with metrics_path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    return row, added


def _mean(parts: list[dict], key: str) -> float | None:
    values = [p[key] for p in parts if key in p]
    return sum(values) / len(values) if values else None


def _count(items) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        out[item] = out.get(item, 0) + 1
    return out


def _save(out: Path, model, opt, teacher, step: int, rank: int, world: int) -> Path:
    """A checkpoint of every rank's shards; `latest` names it only once it is whole."""
    import torch

    from featdel.trainer.checkpoint import save_checkpoint

    path = out / "checkpoints" / f"step-{step:06d}"
    save_checkpoint(path, model, opt, step)
    if rank == 0 and teacher.kind == "ema":
        torch.save(teacher.model.state_dict(), path / "teacher_ema.pt")
    if world > 1:
        import torch.distributed as dist

        dist.barrier()
    if rank == 0:
        tmp = out / "checkpoints" / "latest.tmp"
        tmp.write_text(path.name + "\n")
        tmp.replace(out / "checkpoints" / "latest")
        for old in sorted((out / "checkpoints").glob("step-*"))[:-2]:
            import shutil

            shutil.rmtree(old, ignore_errors=True)
    return path


def _resume(out: Path, model, opt, teacher, rank: int) -> int:
    """The step to start from: 0, or the latest whole checkpoint's (later steps' files go)."""
    import torch

    from featdel.trainer.checkpoint import load_checkpoint

    latest = out / "checkpoints" / "latest"
    if not latest.exists():
        return 0
    path = out / "checkpoints" / latest.read_text().strip()
    step = load_checkpoint(path, model, opt)
    if teacher.kind == "ema" and (path / "teacher_ema.pt").exists():
        teacher.model.load_state_dict(torch.load(path / "teacher_ema.pt", weights_only=True))
    if rank == 0:
        metrics = out / "metrics.jsonl"
        if metrics.exists():
            keep = [line for line in metrics.read_text().splitlines() if line and json.loads(line)["step"] <= step]
            metrics.write_text("".join(line + "\n" for line in keep))
        for f in (out / "trajectories").glob("step-*.jsonl"):
            if int(f.stem.split("-")[1]) > step:
                f.unlink()
    return step


def _progress(enabled: bool, steps: int, start: int):
    """A rich progress bar over steps (rank 0); returns `update(step, row)`, `update(None, None)` closes."""
    if not enabled:
        return lambda step, row: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(TextColumn("train"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                   TextColumn("{task.description}"))
    bar.start()
    task = bar.add_task("", total=steps, completed=start)

    def update(step, row):
        if step is None:
            bar.stop()
            return
        bar.update(task, completed=step + 1, description=f"reward {row['reward_mean']:.2f} loss {row['loss'] or 0:.4f}"
                                                         f" hints {row['hints']}")

    return update

"""The hint gap, before any training: how far a hint moves a model, per hint rule, for the
pretrained model and the from-scratch byte model side by side.

In: the named pretrained model (`featdel model fetch smollm2-135m-instruct`, played in its chat
format: `featdel.trainer.hf.HFCodec`) and the from-scratch byte model of docs/targeted_rl.md (its
supervised warm-up, trained here by `bench/targeted_rl.py`'s `warm_up` and reused from --out).
Out: per model and rule, over the hinted turns of the toy environment's behaviour-prior
episodes (`bench/toyenv.py`: the same tasks, the same actions, the same hints for both models,
each in its own tokens), the mean of

- `heed`: log p_T(heeding action) - log p_S(heeding action), the action the hint asks for
  (`toyenv.heed`: `run_tests` after `submit_untested`, a valid call after a broken one);
- `own`: log p_T(student's action) - log p_S(student's action), the action the turn took;

where S is the model on the turn's context and T the same model with the hint inserted as the
trainer's teacher reads it (`Teacher.hinted`: a user message before the assistant's header in
chat format, a `<hint>` line for bytes). Summed over the action's tokens, and per token. The
literature's predictor of what self-distillation can gain is this gap: positive `heed`, negative
`own`. With --real DIR it also reads a `featdel train` run's trajectories (real tasks, the
pretrained model's own tokens) for the pretrained model; heeding actions there are the rule's
canonical call (`REAL_HEED`).

    .venv/bin/python bench/hint_gap.py --episodes 20 --out runs/hint_gap > bench/results/2026-12-02-hint-gap.txt
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # bench.toyenv, run as a script

REAL_HEED = {"submit_untested": ("run_tests", {}), "malformed_call": ("list_dir", {"path": "."}),
             "unknown_tool": ("list_dir", {"path": "."}), "long_output": ("list_dir", {"path": "."}),
             "repeated_failure": ("list_dir", {"path": "."}), "test_edit": ("list_dir", {"path": "."})}


class Replay:
    """Plays given action lines in order in any codec (then submits): the prior's episode again."""

    def __init__(self, lines: list[str], codec):
        self.lines, self.codec, self.turn = lines, codec, 0

    def act(self, context, *, max_tokens, seed):
        from featdel.agent.protocol import render

        line = self.lines[self.turn] if self.turn < len(self.lines) else render("submit")
        self.turn += 1
        ids = self.codec.encode(line)[:max_tokens]
        return ids, [0.0] * len(ids)


def loglik(model, context: list[int], action: list[int]) -> float:
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([context + action]))[0].float()
    lp = torch.log_softmax(logits[len(context) - 1:-1], -1)
    return lp.gather(-1, torch.tensor(action)[:, None]).sum().item()


def gaps(model, teacher, traj, hint, heed_ids: list[int]) -> dict:
    turn = next(t for t in traj.turns if t.index == hint.turn)
    context = traj.tokens[:turn.action_start]
    hinted, _ = teacher.hinted(context, len(context), [hint])
    out = {}
    for kind, action in (("heed", heed_ids), ("own", list(turn.action_ids))):
        delta = loglik(model, hinted, action) - loglik(model, context, action)
        out[kind], out[f"{kind}_per_token"] = delta, delta / max(1, len(action))
    return out


def toy_rows(args, name: str, model, codec) -> list[dict]:
    """One row per hinted turn of the prior's episodes, replayed in `codec` (None: bytes)."""
    import random

    from bench.toyenv import TOY_CONFIG, BehaviourPrior, ToyEnv, heed, make_task, toy_episode
    from featdel.agent.episode import play
    from featdel.agent.policy import BYTES, decode
    from featdel.trainer.rl import Teacher

    prior, rows, skipped = BehaviourPrior(), [], 0
    teacher = Teacher(model, "live", codec=codec)
    for i in range(args.episodes):
        seed = 7_000_000 + i
        task, rng = make_task(seed), random.Random(seed)
        byte_traj = toy_episode(task, prior, seed=seed)
        lines = [t.action_text for t in byte_traj.turns]
        traj = byte_traj if codec is None else play(ToyEnv(task, TOY_CONFIG), Replay(lines, codec), TOY_CONFIG)
        if [(h.turn, h.rule) for h in traj.hints] != [(h.turn, h.rule) for h in byte_traj.hints]:
            skipped += 1  # the replay took another path (a line cut differently): not the same turns
            continue
        for hint in traj.hints:
            turn = byte_traj.turns[hint.turn]
            line = heed(hint.rule, decode(byte_traj.tokens[:turn.action_start]), turn.action_text, prior, rng)
            rows.append({"model": name, "env": "toy", "rule": hint.rule,
                         **gaps(model, teacher, traj, hint, (codec or BYTES).encode(line))})
    if skipped:
        print(f"{name}: {skipped} replays diverged and were left out", file=sys.stderr)
    return rows


def real_rows(model, codec, folder: Path, limit: int) -> list[dict]:
    """Rows from a `featdel train --model` run's trajectories (the pretrained model's own tokens)."""
    from featdel.agent.protocol import render
    from featdel.agent.trajectory import read_trajectories
    from featdel.trainer.rl import Teacher

    teacher, rows = Teacher(model, "live", codec=codec), []
    for path in sorted(folder.glob("step-*.jsonl")):
        for traj in read_trajectories(path):
            for hint in traj.hints:
                if len(rows) < limit and traj.tokens:
                    name, call_args = REAL_HEED.get(hint.rule, ("list_dir", {"path": "."}))
                    heed_ids = codec.encode(render(name, call_args))
                    rows.append({"model": "smollm2-135m-instruct", "env": "real", "rule": hint.rule,
                                 **gaps(model, teacher, traj, hint, heed_ids)})
    return rows


def table(rows: list[dict]) -> str:
    keys = sorted({(r["env"], r["rule"]) for r in rows})
    models = sorted({r["model"] for r in rows})
    head = "| env | rule | " + " | ".join(f"{m}: n, heed, own (per token: heed, own)" for m in models) + " |"
    lines = [head, "|" + "---|" * (2 + len(models))]
    for env, rule in keys:
        cells = []
        for m in models:
            hit = [r for r in rows if (r["env"], r["rule"], r["model"]) == (env, rule, m)]
            if not hit:
                cells.append("-")
                continue
            mean = {k: statistics.mean(r[k] for r in hit) for k in ("heed", "own", "heed_per_token", "own_per_token")}
            cells.append(f"{len(hit)}, {mean['heed']:+.2f}, {mean['own']:+.2f} "
                         f"({mean['heed_per_token']:+.3f}, {mean['own_per_token']:+.3f})")
        lines.append(f"| {env} | `{rule}` | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=20, help="behaviour-prior episodes of the toy environment")
    ap.add_argument("--warmup-steps", type=int, default=250, help="the byte model's warm-up (reused from --out)")
    ap.add_argument("--real", type=Path, default=None, help="a featdel train --model run's trajectories/ folder")
    ap.add_argument("--real-limit", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path("runs/hint_gap"))
    args = ap.parse_args(argv)
    import torch
    from transformers import AutoTokenizer

    from bench.targeted_rl import parse_args as rl_args
    from bench.targeted_rl import warm_up
    from featdel.trainer.hf import HFCodec, load
    from featdel.trainer.model import Transformer
    from featdel.trainer.pretrained import fetch

    torch.set_num_threads(1)
    started = time.monotonic()
    args.out.mkdir(parents=True, exist_ok=True)
    path = fetch("smollm2-135m-instruct").path
    hf, _ = load(path)
    hf.eval()
    codec = HFCodec(AutoTokenizer.from_pretrained(path, local_files_only=True))
    rows = toy_rows(args, "smollm2-135m-instruct", hf, codec)
    if args.real:
        rows += real_rows(hf, codec, args.real, args.real_limit)
    warm_args = rl_args(["--out", str(args.out), "--warmup-steps", str(args.warmup_steps)])
    log = warm_up(warm_args, 0)
    byte = Transformer(warm_args.preset)
    byte.load_state_dict(torch.load(args.out / "warmup-seed0.pt"))
    byte.eval()
    rows += toy_rows(args, f"from-scratch byte ({warm_args.preset}, {args.warmup_steps}-step warm-up)", byte, None)
    (args.out / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    print(f"# hint gap, {time.strftime('%Y-%m-%d')}: teacher minus student log-likelihood, summed over the action")
    print(f"# command: .venv/bin/python bench/hint_gap.py {' '.join(argv or sys.argv[1:])}")
    print(f"# toy episodes {args.episodes}; byte warm-up {json.dumps(log)}; {time.monotonic() - started:.0f} s")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Invariant: the real pretrained model (SmolLM2-135M-Instruct, `featdel model fetch`) trains
through `featdel train --model NAME` on CPU, in its own chat format, on real featdel tasks.

Pins: a step runs on the packaged tiny run with a finite loss and checkpoints (resuming from a
Hugging Face model's checkpoint is tests/test_train_hf.py's, on a tiny one: a step of this model
costs about a minute of CPU);
the episode is a conversation in the model's chat template (system and user messages, the
assistant's header before every action, each observation a user message); the hint rules fire
on what the model does (its turns run long, break their calls) and are recorded by rule; the
teacher reads each hint as a user message placed before the assistant's header of the turn it
targets, so the action's tokens are the same tokens in both contexts.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

FEATDEL = str(Path(sys.executable).parent / "featdel")


def train(run, out, db, steps, env):
    done = subprocess.run([FEATDEL, "train", str(run), "--model", "smollm2-135m-instruct", "--preset", "smoke",
                           "--steps", str(steps), "--out", str(out), "--db", str(db)],
                          capture_output=True, text=True, timeout=1800, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_the_pretrained_model_trains_in_its_chat_format_and_checkpoints(smollm2, packaged_tiny, tmp_path):
    from transformers import AutoTokenizer

    from featdel.agent.trajectory import read_trajectories
    from featdel.trainer.hf import HINT_PREFIX, HFCodec
    from featdel.trainer.rl import Teacher

    # torch's own thread count (the machine's cores): the update is most of this test's time
    env = {**os.environ, "FEATDEL_MODELS": str(smollm2.parent)}
    env.pop("OMP_NUM_THREADS", None)
    out, db = tmp_path / "smol", tmp_path / "c.duckdb"
    train(packaged_tiny, out, db, 1, env)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1] and rows[0]["trajectories"] == 2
    assert all(math.isfinite(r["loss"]) for r in rows if not r["skipped_update"])
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000001"
    assert sum(r["hints"] for r in rows) >= 1 and any(r["hints_by_rule"] for r in rows), rows

    codec = HFCodec(AutoTokenizer.from_pretrained(smollm2, local_files_only=True))
    header = codec.chat.header
    trajs = [t for f in sorted((out / "trajectories").glob("step-*.jsonl")) for t in read_trajectories(f)]
    assert len(trajs) == 2
    for t in trajs:
        if t.status == "broken":
            continue
        text = codec.decode(t.tokens)
        assert text.startswith("<|im_start|>system\n") and "<|im_start|>user\nA feature was removed" in text
        for turn in t.turns:  # every action follows the assistant's header
            assert codec.decode(t.tokens[turn.action_start - len(codec.encode(header)):turn.action_start]) == header
        if len(t.turns) > 1:
            assert "<|im_end|>\n<|im_start|>user\n" in text, "an observation is a user message"
    hinted = [(t, h) for t in trajs for h in t.hints if t.status != "broken"]
    assert hinted, "no hint fired in 2 trajectories"
    t, h = hinted[0]
    turn = next(x for x in t.turns if x.index == h.turn)
    teacher_ids, where = Teacher(torch.nn.Linear(1, 1), "live", codec=codec).hinted(t.tokens, turn.action_start,
                                                                                    [h])
    seen = codec.decode(teacher_ids[:where[turn.action_start]])
    assert seen.endswith(f"<|im_start|>user\n{HINT_PREFIX}{h.text}<|im_end|>\n{header}"), seen[-300:]
    action = range(turn.action_start, turn.action_start + len(turn.action_ids))
    assert [teacher_ids[where[p]] for p in action] == turn.action_ids

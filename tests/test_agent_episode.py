"""Episodes through the real sandbox and grader, on a real tiny task (tiny repo, real venv).

Pins: a scripted policy that restores the feature earns reward 1 from `featdel.grading.grade` (k rollouts
in parallel threads, each in its own work tree; a rollout that raises is a `broken` record and
the others finish), and one that submits nothing earns 0 with the `submit_untested` hint;
malformed and unknown calls, path escapes and test edits become error observations or hints,
never crashes; turn and token budgets end episodes; a trajectory survives its JSON line unchanged
and its mask covers exactly the policy's tokens; tasks load from shards; an untrained debug
Transformer runs whole episodes (garbage in, handled).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from featdel.agent.episode import (
    AgentTask,
    EpisodeConfig,
    final_patch,
    rollouts,
    run_episode,
)
from featdel.agent.policy import ScriptedPolicy, decode
from featdel.agent.protocol import render
from featdel.agent.trajectory import read_trajectories, save_trajectories
from featdel.code.trees import diff
from featdel.grading.grade import GradeTask
from tests.conftest import mine_tiny

LIB = {
    "pyproject.toml": (
        '[project]\nname = "agentlib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "agentlib/__init__.py": "from agentlib.text import shout, whisper\n",
    "agentlib/text.py": "def shout(s):\n    return s.upper() + '!'\n\n\ndef whisper(s):\n    return s.lower()\n",
    "tests/test_text.py": (
        "from agentlib import shout, whisper\n\n\n"
        "def test_shout():\n    assert shout('hi') == 'HI!'\n\n\n"
        "def test_shout_empty():\n    assert shout('') == '!'\n\n\n"
        "def test_whisper():\n    assert whisper('HI') == 'hi'\n\n\n"
        "def test_whisper_empty():\n    assert whisper('') == ''\n"
    ),
}
STUBBED = "def shout(s):\n    raise NotImplementedError\n\n\ndef whisper(s):\n    return s.lower()\n"
F2P = ["tests/test_text.py::test_shout", "tests/test_text.py::test_shout_empty"]
P2P = ["tests/test_text.py::test_whisper", "tests/test_text.py::test_whisper_empty"]
SOLVE = [
    render("list_dir", {"path": "agentlib"}),
    render("read_file", {"path": "agentlib/text.py"}),
    render("write_file", {"path": "agentlib/text.py", "content": LIB["agentlib/text.py"]}),
    render("run_tests"),
    render("submit"),
]


@pytest.fixture(scope="module")
def mined(tmp_path_factory, featdel_cache, local_backend):
    run_dir, record = mine_tiny(tmp_path_factory, "agentlib", LIB, local_backend)
    return run_dir, record


@pytest.fixture(scope="module")
def task(mined) -> AgentTask:
    from featdel.env.envs import load

    run_dir, record = mined

    snapshot = run_dir / "repos" / record.name / "snapshot.tar.gz"
    deletion_patch, gold = diff(snapshot, {"agentlib/text.py": STUBBED})
    grade_task = GradeTask(instance_id="agentlib__shout", env=load(Path(record.env_dir)), snapshot=snapshot,
                           deletion_patch=deletion_patch, gold_patch=gold, fail_to_pass=F2P, pass_to_pass=P2P,
                           timeout_s=60)
    return AgentTask(grade=grade_task, statement="`shout(s)` should upper-case `s` and add an exclamation mark.")


def test_scripted_solver_earns_reward_one_in_parallel_rollouts(task, local_backend, tmp_path):
    trajs = rollouts(task, ScriptedPolicy(SOLVE), local_backend, k=2, workdir=tmp_path)
    for i, traj in enumerate(trajs):
        assert traj.rollout == i and traj.ended == "submitted"
        assert traj.reward == 1.0 and traj.status == "resolved", (traj.status, traj.reason)
        assert [t.call["name"] for t in traj.turns] == ["list_dir", "read_file", "write_file", "run_tests", "submit"]
        assert "NotImplementedError" in traj.turns[1].observation
        assert traj.turns[3].observation.startswith("2 of 2 tests passed"), traj.turns[3].observation
        assert traj.hints == []
        assert "agentlib/text.py" in traj.patch and "+    return s.upper() + '!'" in traj.patch
        assert (tmp_path / f"rollout-{i}" / "work" / "agentlib" / "text.py").read_text() == LIB["agentlib/text.py"]


def test_submitting_nothing_earns_zero_and_a_hint(task, local_backend):
    traj = run_episode(task, ScriptedPolicy([render("submit")]), local_backend)
    assert traj.ended == "submitted" and traj.patch == ""
    assert traj.reward == 0.0 and traj.status == "unresolved", (traj.status, traj.reason)
    assert [(h.rule, h.turn, h.at) for h in traj.hints] == [("submit_untested", 0, traj.prompt_len)]


def test_bad_calls_become_error_observations_and_hints(task, local_backend, tmp_path):
    lines = [
        "I think I should look around first",  # no call at all
        render("open_file", {"path": "agentlib/text.py"}),  # no such tool
        render("open_file", {"path": "agentlib/text.py"}),  # the same failing call again
        '<tool>{"name": "read_file", "args": {"path": 3}}</tool>',  # wrong argument type
        render("read_file", {"path": "../../../etc/passwd"}),
        render("read_file", {"path": "/etc/passwd"}),
        render("write_file", {"path": "../escape.py", "content": "x = 1\n"}),
        render("write_file", {"path": "tests/test_text.py", "content": "def test_shout():\n    pass\n"}),
        render("run_tests", {"tests": ["../outside.py::test_x"]}),
        "\x00\xff<tool><tool>}{</tool>",
        render("submit"),
    ]
    traj = run_episode(task, ScriptedPolicy(lines), local_backend, workdir=tmp_path)
    errors = [(t.index, t.error) for t in traj.turns if t.error]
    assert errors == [(0, "malformed"), (1, "unknown_tool"), (2, "unknown_tool"), (3, "malformed"), (9, "malformed")]
    assert all(traj.turns[i].observation.startswith("error:") for i in (0, 1, 2, 3, 4, 5, 6, 8, 9))
    assert not (tmp_path / "escape.py").exists() and not (tmp_path.parent / "escape.py").exists()
    hints = {(h.turn, h.rule) for h in traj.hints}
    assert {(0, "malformed_call"), (1, "unknown_tool"), (2, "unknown_tool"), (2, "repeated_failure"),
            (3, "malformed_call"), (7, "test_edit"), (10, "submit_untested")} <= hints
    assert "list_dir, read_file, write_file, apply_patch, run_tests, submit" in next(
        h.text for h in traj.hints if h.rule == "unknown_tool")
    assert "read_file(path: str" in next(h.text for h in traj.hints if h.turn == 3)
    # The edited test is not graded: the grader takes tests from the task, so no reward.
    assert traj.reward == 0.0 and "tests/test_text.py" in traj.patch


def test_budgets_end_episodes(task, local_backend):
    looking = ScriptedPolicy([render("list_dir")] * 10)
    by_turns = run_episode(task, looking, local_backend, config=EpisodeConfig(max_turns=3, require_submit=True))
    assert by_turns.ended == "turn_budget" and len(by_turns.turns) == 3
    assert by_turns.status == "not_submitted" and by_turns.reward == 0.0
    by_tokens = run_episode(task, looking, local_backend,
                            config=EpisodeConfig(max_tokens=by_turns.prompt_len + 120, require_submit=True))
    assert by_tokens.ended == "token_budget" and len(by_tokens.turns) == 2
    cut = by_tokens.turns[-1]  # cut off by the episode's budget, not rambling: no long_output hint
    assert cut.action_start + len(cut.action_ids) == by_tokens.prompt_len + 120 and cut.error == "malformed"
    assert [h.rule for h in by_tokens.hints] == ["malformed_call"]
    rambling = ScriptedPolicy(["x" * 5000])
    capped = run_episode(task, rambling, local_backend,
                         config=EpisodeConfig(max_turns=1, max_action_tokens=100, require_submit=True))
    [turn] = capped.turns
    assert len(turn.action_ids) == 100 and turn.hit_cap
    assert {h.rule for h in capped.hints} == {"malformed_call", "long_output"}


def test_trajectory_round_trips_and_mask_is_the_policy_tokens(task, local_backend, tmp_path):
    traj = run_episode(task, ScriptedPolicy(SOLVE[:2] + [render("nope"), render("submit")]), local_backend)
    path = tmp_path / "trajectories.jsonl"
    save_trajectories(path, [traj, traj])
    assert read_trajectories(path) == [traj, traj]
    assert len(traj.tokens) == len(traj.mask)
    assert traj.policy_tokens() == [i for t in traj.turns for i in t.action_ids]
    for turn in traj.turns:
        assert traj.tokens[turn.action_start : turn.action_start + len(turn.action_ids)] == turn.action_ids
        assert set(traj.mask[turn.action_start : turn.action_start + len(turn.action_ids)]) == {1}
        assert set(traj.mask[turn.obs_start : turn.obs_start + turn.obs_len]) == {0}
        assert turn.obs_start == turn.action_start + len(turn.action_ids)
    assert sum(traj.mask) == sum(len(t.action_ids) for t in traj.turns)
    assert set(traj.mask[: traj.prompt_len]) == {0}
    assert traj.hints and all(h.at == traj.turns[h.turn].action_start for h in traj.hints)
    pytest.importorskip("torch")
    from featdel.trainer.rl_loss import insert_hint

    hint = traj.hints[0]
    turn = traj.turns[hint.turn]
    teacher, where = insert_hint(traj.tokens, hint.at, hint.ids())
    assert decode(teacher[hint.at : hint.at + len(hint.ids())]) == f"<hint>{hint.text}</hint>\n"
    assert [teacher[where[p]] for p in range(turn.action_start, turn.action_start + len(turn.action_ids))] == (
        turn.action_ids)


def test_tasks_load_from_shards_with_their_statements(mined, task, local_backend, tmp_path):
    """The loader reads the task and env shards (written here as `featdel package` writes them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from featdel.agent.episode import load_agent_tasks
    from featdel.core.rundir import RunDir
    from featdel.core.shards import ENV_SCHEMA, TASK_SCHEMA
    from featdel.pipeline.package import env_row

    run_dir, record = mined
    env = env_row(run_dir, record)
    row = {"instance_id": task.instance_id, "env_id": env["env_id"], "deletion_patch": task.grade.deletion_patch,
           "patch": task.grade.gold_patch, "test_patch": "", "problem_statement": task.statement,
           "FAIL_TO_PASS": F2P, "PASS_TO_PASS": P2P, "timeout_s": 60.0}
    layout = RunDir(run_dir)
    for folder, stem, rows, schema in ((layout.tasks_dir, "tasks", [row], TASK_SCHEMA),
                                       (layout.envs_dir, "envs", [env], ENV_SCHEMA)):
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=schema), folder / f"{stem}-00000.parquet")
    loaded = load_agent_tasks(run_dir, tmp_path)
    assert set(loaded) == {task.instance_id}
    got = loaded[task.instance_id]
    assert isinstance(got, AgentTask), got
    assert got.statement == task.statement and got.grade.fail_to_pass == F2P
    traj = run_episode(got, ScriptedPolicy(SOLVE[2:]), local_backend)
    assert traj.reward == 1.0, (traj.status, traj.reason)


def test_untrained_transformer_runs_episodes_end_to_end(task, local_backend):
    torch = pytest.importorskip("torch")
    from featdel.trainer.model import Transformer
    from featdel.trainer.policy import TransformerPolicy

    torch.manual_seed(0)
    policy = TransformerPolicy(Transformer("debug").eval(), window=256)
    config = EpisodeConfig(max_turns=4, max_action_tokens=48)
    trajs = rollouts(task, policy, local_backend, k=2, config=config, seed=5)
    for traj in trajs:
        assert len(traj.turns) >= 1 and traj.ended in ("turn_budget", "submitted", "token_budget")
        assert traj.reward == 0.0 and traj.status in ("unresolved", "patch_failed", "suspect")
        assert traj.policy_tokens() == [i for t in traj.turns for i in t.action_ids]
        for turn in traj.turns:
            assert len(turn.logprobs) == len(turn.action_ids) <= 48
            assert all(lp <= 0.0 and lp > -1e4 for lp in turn.logprobs)
    assert trajs[0].tokens != trajs[1].tokens  # different seeds sample differently


def test_final_patch_ignores_caches_the_tests_left(task, local_backend, tmp_path):
    traj = run_episode(task, ScriptedPolicy([render("run_tests"), render("submit")]), local_backend, workdir=tmp_path)
    assert traj.patch == "" and traj.turns[0].ran_tests
    (tmp_path / "work" / "agentlib" / "__pycache__").mkdir(exist_ok=True)
    (tmp_path / "work" / "agentlib" / "__pycache__" / "text.cpython-311.pyc").write_bytes(b"\0junk")
    assert final_patch(tmp_path / "start", tmp_path / "work") == ""


class OddRolloutsBreak:
    """Submits at once; in odd rollouts it emits an id outside the byte vocabulary (a policy bug)."""

    def act(self, context, *, max_tokens, seed):
        if seed % 2:  # turn 0 of rollout i samples with seed (seed + i) * 1000003, an odd multiplier
            return [999], [0.0]
        ids = list(render("submit").encode())
        return ids, [0.0] * len(ids)


def test_a_rollout_that_raises_is_a_broken_record_and_the_rest_go_on(task, local_backend):
    ok, broken = rollouts(task, OddRolloutsBreak(), local_backend, k=2, config=EpisodeConfig(require_submit=True))
    assert ok.ended == "submitted" and ok.status == "unresolved" and ok.reward == 0.0
    assert broken.status == "broken" and broken.ended == "error" and broken.reward == 0.0
    assert "outside its vocabulary of 256" in broken.reason and broken.tokens == [] and broken.rollout == 1

"""`featdel train` end to end on packaged shards: real sandboxed rollouts, real grading, real
DCP checkpoints, real DuckDB attempts, and a real 2-rank torchrun (gloo).

Pins: a run writes finite losses for every step, token-exact trajectories, a checkpoint named
by `latest`, and one attempt per rollout in the curriculum database; the same command resumes
from the checkpoint (and does not run finished steps again); the same folder with other options
is refused in one line; under torchrun the ranks' sampling copies equal the FSDP shards (the
sampled log-probabilities are what the update scores, KL ~ 0) and the 2-rank checkpoint resumes
in one process; a trajectory the monitor flags earns nothing.
"""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

FEATDEL = str(Path(sys.executable).parent / "featdel")


def train(run_dir, out, *extra, steps=2, launcher=()):
    argv = [*launcher, FEATDEL, "train", str(run_dir), "--preset", "debug", "--steps", str(steps),
            "--out", str(out), "--db", str(out.parent / f"{out.name}.duckdb"), *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=900)


def metrics(out):
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def attempts(out):
    from featdel.core.store import attempts as read

    return read(out.parent / f"{out.name}.duckdb")


def test_train_writes_everything_resumes_and_refuses_another_run(packaged_tiny, tmp_path):
    from featdel.agent.trajectory import read_trajectories

    out = tmp_path / "t"
    done = train(packaged_tiny, out)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = metrics(out)
    assert [r["step"] for r in rows] == [1, 2]
    assert all(math.isfinite(r["loss"]) and math.isfinite(r["policy"]) for r in rows)
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000002"
    trajs = read_trajectories(out / "trajectories" / "step-000001.jsonl")
    assert len(trajs) == 4 and all(len(t.tokens) == len(t.mask) and sum(t.mask) > 0 for t in trajs)
    assert len(attempts(out)) == 8 and {a.learner for a in attempts(out)} == {"train:t"}

    again = train(packaged_tiny, out, steps=3)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "start=2" in again.stdout
    assert [r["step"] for r in metrics(out)] == [1, 2, 3]
    assert len(attempts(out)) == 12

    other = train(packaged_tiny, out, "--seed", "1", steps=3)
    assert other.returncode != 0
    assert "holds another run" in other.stderr and "seed was 0 now 1" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1

    # the checkpoint is a learner for `featdel solve --policy`: one prediction and trajectory per task
    preds = tmp_path / "preds.jsonl"
    solved = subprocess.run([FEATDEL, "solve", str(packaged_tiny), "--policy", str(out), "--out",
                             str(preds), "--max-turns", "2"], capture_output=True, text=True, timeout=900)
    assert solved.returncode == 0, solved.stdout + solved.stderr
    rows = [json.loads(line) for line in preds.read_text().splitlines()]
    tasks = {t.instance_id for t in read_trajectories(preds.with_name("preds_trajectories.jsonl"))}
    assert rows and {r["model_name_or_path"] for r in rows} == {str(out)}
    assert {r["instance_id"] for r in rows} == tasks and all("model_patch" in r for r in rows)


@pytest.mark.skipif(shutil.which("torchrun", path=str(Path(sys.executable).parent)) is None,
                    reason="torchrun is not installed beside this python")
def test_two_ranks_under_torchrun_and_resume_in_one_process(packaged_tiny, tmp_path):
    out = tmp_path / "t2"
    torchrun = [str(Path(sys.executable).parent / "torchrun"), "--standalone", "--nproc-per-node", "2"]
    done = train(packaged_tiny, out, steps=1, launcher=torchrun)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [row] = metrics(out)
    assert row["trajectories"] == 4 and math.isfinite(row["loss"])
    assert abs(row["kl_old"]) < 1e-3  # every rank sampled from the weights the shards hold
    shards = sorted(p.name for p in (out / "checkpoints" / "step-000001").glob("*.distcp"))
    assert len(shards) == 2
    one = train(packaged_tiny, out, steps=2)
    assert one.returncode == 0, one.stdout + one.stderr
    assert "start=1" in one.stdout and [r["step"] for r in metrics(out)] == [1, 2]


def test_without_hints_or_a_reward_difference_no_step_is_taken(packaged_tiny, tmp_path):
    import torch

    from featdel.trainer.checkpoint import load_model
    from featdel.trainer.model import Transformer
    from featdel.trainer.rl_presets import preset

    out = tmp_path / "nohints"
    done = train(packaged_tiny, out, "--no-hints")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = metrics(out)
    assert all(r["reward_mean"] == 0.0 for r in rows)  # a random byte model solves nothing
    assert all(r["skipped_update"] and r["loss"] is None for r in rows)
    weights = []
    for step in ("step-000001", "step-000002"):
        model = Transformer(preset("debug").model)
        load_model(out / "checkpoints" / step, model)
        weights.append(torch.cat([q.detach().flatten() for q in model.parameters()]))
    # an optimizer step on zero advantages would still move the weights (Muon along its
    # momentum, AdamW by weight decay): skipped, they stay exactly as they were
    assert torch.equal(weights[0], weights[1])
    assert len(attempts(out)) == 8  # the rollouts still count as attempts


def test_a_flagged_trajectory_earns_nothing():
    from featdel.agent.trajectory import Trajectory, Turn
    from featdel.trainer.rl_train import _monitor

    turn = Turn(index=0, action_start=1, action_ids=[65], logprobs=[0.0], action_text="",
                call={"name": "read_file", "args": {"path": ".git/ORIG_HEAD"}}, error=None, observation="x", ok=True)
    hacked = Trajectory(instance_id="i", rollout=0, seed=0, prompt_len=1, tokens=[1, 65], mask=[0, 1], turns=[turn],
                        hints=[], ended="submitted", patch="", reward=1.0, status="resolved")
    clean = Trajectory(**{**hacked.to_dict(), "turns": [], "hints": []})
    [flagged, kept] = _monitor([hacked, clean])
    assert (flagged.reward, flagged.status) == (0.0, "flagged") and "git_internals" in flagged.reason
    assert (kept.reward, kept.status) == (1.0, "resolved")


def test_training_stops_in_one_line_when_the_monitor_cannot_be_imported(monkeypatch, tmp_path):
    from featdel.core.errors import TrainError
    from featdel.trainer.rl_train import RLTrainOptions, train_rl

    monkeypatch.setitem(sys.modules, "featdel.monitor", None)  # `import featdel.monitor` now raises ImportError
    with pytest.raises(TrainError, match="monitor cannot be imported") as err:
        train_rl(RLTrainOptions(tasks=tmp_path / "run", out=tmp_path / "out"))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing was started

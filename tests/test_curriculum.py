"""The curriculum on real tasks: attempts graded by `featdel evaluate` on a packaged run are
recorded, summarised and sampled through the CLI; learnability sampling draws more informative
attempt groups than uniform sampling; with steering, the pass rate of newly generated tasks stays
within 0.1 of the target while a simulated learner's skill grows, and without it drifts out; the
difficulty model beats the base rate; a steered delete stage records its knobs and predicted
pass rate on every packaged task.

Real task features come from the session's packaged tiny run (`packaged_tiny`); the only thing
simulated is the learner (logistic(skill - difficulty) over those features).
"""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from featdel.cli.main import app
from featdel.core import store
from featdel.curriculum import model as dm
from featdel.curriculum import posterior, sampler, simulate


@pytest.fixture(scope="module")
def rows(packaged_tiny):
    out = posterior.task_rows(packaged_tiny)
    assert len(out) >= 2
    return out


def test_record_stats_sample_on_a_real_run(packaged_tiny, local_backend, tmp_path):
    from featdel.core.shards import read_tasks
    from featdel.grading.evaluate import evaluate

    tasks = read_tasks(packaged_tiny).to_pylist()
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"instance_id": t["instance_id"], "model_patch": p, "model_name_or_path": m})
                             + "\n" for t in tasks for m, p in (("gold", t["patch"]), ("empty", ""))))
    results = tmp_path / "results.jsonl"
    evaluate(packaged_tiny, preds, results, local_backend, jobs=2)
    with results.open("a") as f:  # an infrastructure failure: stored, never a failure
        f.write(json.dumps({"instance_id": tasks[0]["instance_id"], "status": "broken", "reward": 0.0}) + "\n")
    db = tmp_path / "c.duckdb"
    runner = CliRunner()
    common = [str(packaged_tiny), "--db", str(db)]
    first = runner.invoke(app, ["curriculum", "record", *common, str(results), "--learner", "L"])
    assert first.exit_code == 0, first.output
    assert f"{2 * len(tasks) + 1} new attempts" in first.output and "1 broken" in first.output
    again = runner.invoke(app, ["curriculum", "record", *common, str(results), "--learner", "L"])
    assert "0 new attempts" in again.output
    out = store.outcomes(db, learner="L")
    assert all((o.successes, o.trials) == (1.0, 2) for o in out.values())
    assert out[tasks[0]["instance_id"]].broken == 1
    stats = runner.invoke(app, ["curriculum", "stats", *common, "--learner", "L"])
    assert stats.exit_code == 0, stats.output
    assert "by strategy" in stats.output and "by difficulty" in stats.output and "Brier" in stats.output
    draws = [runner.invoke(app, ["curriculum", "sample", "-n", "2", "--seed", "3", *common]) for _ in range(2)]
    assert draws[0].exit_code == 0, draws[0].output
    assert draws[0].output == draws[1].output
    ids = draws[0].output.split()
    assert len(ids) == 2 and set(ids) <= {t["instance_id"] for t in tasks}
    missing = runner.invoke(app, ["curriculum", "stats", str(packaged_tiny), "--db", str(tmp_path / "no.db")])
    assert missing.exit_code == 2 and "record attempts first" in missing.output


def _stats(iid: str, wins: int, trials: int) -> posterior.TaskStats:
    return posterior.TaskStats(instance_id=iid, repo="r", strategy="body", difficulty={}, successes=wins, trials=trials)


def test_sampler_explores_retires_and_is_deterministic():
    opts = sampler.SampleOptions(n=1)
    assert sampler.retired(_stats("a", 0, 13), opts) == "never"
    assert sampler.retired(_stats("a", 13, 13), opts) == "always"
    assert sampler.retired(_stats("a", 0, 12), opts) == sampler.retired(_stats("a", 6, 13), opts) == ""
    pool = [_stats("unseen", 0, 0), _stats("half", 5, 10), _stats("rare", 1, 10), _stats("dead", 0, 30)]
    picks = [sampler.sample(pool, sampler.SampleOptions(n=1, seed=s))[0] for s in range(400)]
    assert "dead" not in picks
    assert picks.count("unseen") > picks.count("half") > picks.count("rare") > 0
    many = sampler.SampleOptions(n=3, seed=7)
    assert sampler.sample(pool, many) == sampler.sample(pool, many)
    assert sorted(sampler.sample(pool, many)) == ["half", "rare", "unseen"]
    assert sampler.sample(pool, sampler.SampleOptions(n=3, band=(0.3, 1.0))) in (["half", "unseen"], ["unseen", "half"])
    with pytest.raises(ValueError, match="LO <= HI"):
        sampler.SampleOptions(n=1, band=(0.8, 0.2))


def test_steering_holds_the_target_while_skill_grows_and_default_knobs_drift(rows, tmp_path):
    target = 0.5
    steered = simulate.steering_run(rows, tmp_path / "on.duckdb", steer_on=True, target=target, rounds=9)
    default = simulate.steering_run(rows, tmp_path / "off.duckdb", steer_on=False, target=target, rounds=9)
    after_warmup = steered[3:]  # rounds 0-2 explore the knobs: the model needs them and a trend
    assert len(after_warmup) >= 5
    assert all(abs(r.pass_rate - target) <= 0.1 for r in after_warmup), [r.pass_rate for r in steered]
    assert abs(default[-1].pass_rate - target) > 0.1, [r.pass_rate for r in default]
    assert default[-1].pass_rate > default[0].pass_rate  # skill grew
    assert steered[-1].difficulty > steered[3].difficulty + 1.0  # harder tasks as the learner improves


def test_learnability_sampling_draws_more_informative_groups_than_uniform(rows, tmp_path):
    def informative(uniform: bool) -> float:  # rounds 3+ (once seen tasks outnumber unseen), 3 seeds
        return sum(sum(simulate.sampling_run(rows, tmp_path / f"{uniform}{seed}.duckdb", uniform=uniform, rounds=10,
                                             per_round=16, seed=seed)[3:]) for seed in range(3))

    smart, plain = informative(False), informative(True)
    assert smart > plain * 1.05, (smart, plain)


def test_difficulty_model_beats_the_base_rate_out_of_fold(rows, tmp_path):
    db, made = tmp_path / "m.duckdb", {}
    simulate.steering_run(rows, db, steer_on=True, rounds=3, tasks_per_round=40, tasks_out=made)
    obs = dm.observations(list(made.values()), store.by_round(db))
    calib = dm.calibrate(obs, window=None)
    wins = sum(o.successes for o in obs) / sum(o.trials for o in obs)
    base = sum(o.successes * (1 - wins) ** 2 + (o.trials - o.successes) * wins**2 for o in obs) / calib.attempts
    assert calib.out_of_fold and calib.brier < base, (calib, base)
    assert 0.0 <= calib.within <= 1.0 and calib.tolerance == 0.15


def test_a_steered_delete_stage_records_knobs_and_predicted_pass_rate(packaged_tiny, rows, local_backend, tmp_path):
    from featdel.core.shards import read_tasks
    from featdel.curriculum import generate
    from featdel.core.rundir import RunDir
    from featdel.pipeline.context import RepoContext, make_check
    from featdel.pipeline.delete import delete_all
    from featdel.pipeline.package import package
    from featdel.pipeline.verify import VerifyOptions, verify_all

    run = tmp_path / "run"
    shutil.copytree(packaged_tiny, run, symlinks=True)
    for name in ("deletions.jsonl", "verdicts.jsonl", "options.json"):
        (run / name).unlink(missing_ok=True)
    for marker in run.glob("repos/*/deleted.done"):
        marker.unlink()
    shutil.rmtree(run / "tasks")
    made_before: dict = {}
    simulate.steering_run(rows, tmp_path / "h.duckdb", steer_on=True, rounds=2, tasks_per_round=20,
                          tasks_out=made_before)
    fitted = dm.fit(dm.observations(list(made_before.values()), store.by_round(tmp_path / "h.duckdb")))
    plan = generate.SteeredPlanner(model=fitted, target=0.3, learner="sim", strategies=["body", "function"],
                                   max_candidates=2, seed=0)
    made = delete_all(run, plan=plan, max_candidates=2, seed=0,
                      check_for=lambda r: make_check(RepoContext.load(run, r), local_backend))
    assert made
    knobs = RunDir(run).steering()
    assert sorted(knobs) == sorted(d.deletion_id for d in made)
    verify_all(run, local_backend, VerifyOptions(reruns=1))
    package(run)
    tasks = read_tasks(run).to_pylist()
    assert tasks
    for t in tasks:
        s = t["steering"]
        assert s["learner"] == "sim" and s["target_pass_rate"] == pytest.approx(0.3)
        assert 0 < s["predicted_pass_rate"] < 1 and s["strategy"] == t["strategy"]
        assert s["docstrings_kept"] == t["difficulty"]["docstrings_kept"]
        assert s["tests_visible"] == t["difficulty"]["tests_visible"] == (t["test_patch"] == "")

"""One Targeted RL update from trajectories (featdel.trainer.rl).

Pins: the batch lines every policy token up with the log-probability it was sampled with (a
fresh model scores its own samples exactly as it sampled them); broken trajectories never reach
the loss; with hints off, or no hints, the distillation term is zero; a hint targets exactly the
tokens of its turn; the update changes the weights and its losses are finite; the EMA teacher
moves towards the trained weights and the frozen one does not move; a step with nothing usable
still runs one forward, backward and optimizer step (the collectives of other ranks wait for
it) with a zero gradient.
"""

import pytest

torch = pytest.importorskip("torch")

from featdel.agent.policy import OBS_CLOSE, OBS_OPEN, encode  # noqa: E402
from featdel.agent.trajectory import Hint, Trajectory, Turn  # noqa: E402
from featdel.trainer.policy import TransformerPolicy  # noqa: E402
from featdel.trainer.rl import RLConfig, Teacher, rl_step, to_batch, usable, with_signal  # noqa: E402
from featdel.trainer.train import TrainConfig, build  # noqa: E402


def fake_episode(policy, *, iid="t", rollout=0, reward=0.0, turns=2, hint_turn=None, status="unresolved"):
    """An episode's trajectory as run_episode builds it, with actions the policy really sampled."""
    tokens = encode("Restore the feature.\n")
    prompt_len = len(tokens)
    mask = [0] * prompt_len
    out_turns, hints = [], []
    for index in range(turns):
        ids, logprobs = policy.act(tokens, max_tokens=6, seed=100 * rollout + index)
        start = len(tokens)
        tokens, mask = tokens + ids, mask + [1] * len(ids)
        obs = encode("\n" + OBS_OPEN + "error: malformed" + OBS_CLOSE)
        out_turns.append(Turn(index=index, action_start=start, action_ids=ids, logprobs=logprobs,
                              action_text="", call=None, error="malformed", observation="error: malformed",
                              ok=False, obs_start=len(tokens), obs_len=len(obs)))
        tokens, mask = tokens + obs, mask + [0] * len(obs)
        if index == hint_turn:
            hints.append(Hint(turn=index, at=start, rule="malformed_call", text="Write one call per line."))
    return Trajectory(instance_id=iid, rollout=rollout, seed=rollout, prompt_len=prompt_len, tokens=tokens,
                      mask=mask, turns=out_turns, hints=hints, ended="turn_budget", patch="", reward=reward,
                      status=status)


@pytest.fixture()
def model_opt():
    model, opt = build(TrainConfig(model="debug", seed=0))
    return model, opt


def params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_sampled_logprobs_line_up_with_the_batch(model_opt):
    model, _ = model_opt
    policy = TransformerPolicy(model)
    trajs = [fake_episode(policy, rollout=i, turns=3) for i in range(2)]
    b = to_batch(trajs)
    assert int(b.mask.sum()) == sum(sum(t.mask) for t in trajs)
    with torch.no_grad():
        scored = torch.log_softmax(model(b.inputs), -1).gather(-1, b.targets[..., None]).squeeze(-1)
    assert torch.allclose(scored[b.mask], b.old_logprobs[b.mask], atol=1e-4)
    assert torch.equal(b.old_logprobs[~b.mask], torch.zeros_like(b.old_logprobs[~b.mask]))


def test_broken_trajectories_are_left_out(model_opt):
    model, _ = model_opt
    policy = TransformerPolicy(model)
    good = fake_episode(policy, reward=1.0)
    broken = fake_episode(policy, rollout=1, status="broken")
    assert usable([good, broken]) == [good]


def test_signal_is_a_reward_difference_within_a_task_or_a_hint(model_opt):
    model, _ = model_opt
    policy = TransformerPolicy(model)
    same = [fake_episode(policy, iid="a", rollout=i, reward=1.0) for i in range(2)]
    differ = [fake_episode(policy, iid="b", rollout=i, reward=float(i)) for i in range(2)]
    hinted = fake_episode(policy, iid="c", hint_turn=0)
    assert with_signal(same) == 0  # equal rewards: every advantage is zero
    assert with_signal(same + differ) == 2
    assert with_signal(same + [hinted]) == 1 and with_signal(same + [hinted], hints=False) == 0
    # a difference only across tasks is no signal: advantages are taken within a task's group
    assert with_signal([same[0], fake_episode(policy, iid="d", reward=0.0)]) == 0
    assert with_signal([differ[0], fake_episode(policy, iid="b", rollout=1, reward=1.0, status="broken")]) == 0


def test_a_hint_targets_exactly_its_turn_and_changes_the_weights(model_opt):
    model, opt = model_opt
    policy = TransformerPolicy(model)
    trajs = [fake_episode(policy, rollout=i, reward=float(i % 2), hint_turn=1 if i == 0 else None) for i in range(4)]
    before = params(model)
    m = rl_step(model, opt, trajs, cfg=RLConfig(), teacher=Teacher(model, "live"))
    assert m["targeted_tokens"] == len(trajs[0].turns[1].action_ids)
    assert m["hints"] == 1 and m["usable"] == 4 and m["reward_mean"] == 0.5
    assert all(torch.isfinite(torch.tensor(m[k])) for k in ("loss", "policy", "distill", "kl_teacher"))
    assert m["distill"] != 0.0
    assert any(not torch.equal(before[n], p) for n, p in model.named_parameters())


def test_hints_off_means_no_distillation(model_opt):
    model, opt = model_opt
    policy = TransformerPolicy(model)
    trajs = [fake_episode(policy, rollout=i, reward=float(i % 2), hint_turn=0) for i in range(2)]
    m = rl_step(model, opt, trajs, cfg=RLConfig(hints=False), teacher=Teacher(model, "live"))
    assert m["distill"] == 0.0 and m["targeted_tokens"] == 0 and m["hints"] == 2


def test_ema_teacher_moves_and_frozen_does_not(model_opt):
    model, opt = model_opt
    policy = TransformerPolicy(model)
    ema, frozen = Teacher(model, "ema", decay=0.5), Teacher(model, "frozen")
    start = params(frozen.model)
    trajs = [fake_episode(policy, rollout=i, reward=float(i % 2)) for i in range(2)]
    rl_step(model, opt, trajs, cfg=RLConfig(teacher="ema"), teacher=ema)
    live = params(model)
    for t in (ema, frozen):
        t.update(live)
    name = next(n for n in start if not torch.equal(start[n], live[n]))
    assert torch.equal(frozen.model.get_parameter(name), start[name])
    assert torch.allclose(ema.model.get_parameter(name), (start[name] + live[name]) / 2, atol=1e-6)


def test_nothing_usable_still_steps_and_changes_nothing():
    model, opt = build(TrainConfig(model="debug", seed=0, weight_decay=0.0))  # decay alone would move weights
    policy = TransformerPolicy(model)
    before = params(model)
    m = rl_step(model, opt, [fake_episode(policy, status="broken")], teacher=Teacher(model, "live"))
    assert m["usable"] == 0 and m["loss"] == 0.0
    assert all(torch.equal(before[n], p) for n, p in model.named_parameters())


def test_a_bad_teacher_kind_is_refused():
    with pytest.raises(ValueError, match="live, frozen, ema"):
        RLConfig(teacher="average")

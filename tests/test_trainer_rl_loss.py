"""The Targeted RL loss, pinned by its mathematics.

Pins: group advantages have zero mean per task and vanish when every rollout scores the same;
clipping stops the gradient once the ratio leaves its band in the advantage's direction;
the distillation term is exactly zero when the hint is empty (the teacher, the same frozen
model, then sees the student's context); its gradient raises the probability of tokens the
teacher prefers and lowers those it does not, for every estimator; masked tokens and tokens
outside the targeted turn get no gradient; the teacher gets none either.
"""

import copy

import pytest

torch = pytest.importorskip("torch")

from featdel.trainer.model import Transformer  # noqa: E402
from featdel.trainer.rl_loss import LossConfig, distill_loss, group_advantages, insert_hint, policy_loss, rl_loss  # noqa: E402


def test_group_advantages_are_centred_per_task_and_vanish_on_ties():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    groups = torch.tensor([0, 0, 0, 1, 1, 1])
    adv = group_advantages(rewards, groups)
    assert abs(adv[:3].sum()) < 1e-6 and adv[0] > 0 > adv[1]
    assert torch.equal(adv[3:], torch.zeros(3))


def test_clipping_stops_the_gradient_outside_the_band():
    cfg = LossConfig(clip_low=0.2, clip_high=0.2)
    old = torch.zeros(1, 2)
    new = torch.tensor([[0.5, 0.05]], requires_grad=True)  # ratios e^0.5 (out of band) and e^0.05
    policy_loss(new, old, torch.ones(1, 2), torch.ones(1, 2), cfg).backward()
    assert new.grad[0, 0] == 0 and new.grad[0, 1] < 0


@pytest.mark.parametrize("estimator", ["sampled", "full", "topk"])
def test_an_empty_hint_gives_exactly_zero_distillation(estimator):
    torch.manual_seed(0)
    student = Transformer("debug")
    teacher = copy.deepcopy(student).requires_grad_(False)
    context = list(range(40, 60))
    teacher_input, where = insert_hint(context, 10, [])
    tokens = torch.tensor([context[1:]])
    s_logits = student(torch.tensor([context]))[:, :-1]
    t_logits = teacher(torch.tensor([teacher_input]))[:, [p for p in where[:-1]]]
    target = torch.zeros_like(tokens, dtype=torch.bool)
    target[:, 9:] = True
    loss = distill_loss(s_logits, t_logits, tokens, target, LossConfig(distill=estimator, top_k=5))
    assert abs(loss.item()) < 1e-6


@pytest.mark.parametrize("estimator", ["sampled", "full", "topk"])
def test_the_gradient_moves_the_student_towards_what_the_teacher_prefers(estimator):
    student_logits = torch.zeros(1, 2, 6, requires_grad=True)  # uniform over 6 tokens
    teacher_logits = torch.zeros(1, 2, 6)
    teacher_logits[0, :, 2] = 3.0  # the teacher likes token 2
    tokens = torch.tensor([[2, 4]])  # sampled: one the teacher likes, one it does not
    cfg = LossConfig(distill=estimator, top_k=6)
    distill_loss(student_logits, teacher_logits, tokens, torch.ones(1, 2, dtype=torch.bool), cfg).backward()
    step = student_logits.detach() - 0.5 * student_logits.grad
    probs = step.softmax(-1)
    assert probs[0, 0, 2] > 1 / 6  # the teacher's favourite went up where it was sampled
    assert probs[0, 1, 4] < 1 / 6  # the disliked sampled token went down


def test_masked_and_untargeted_tokens_get_no_gradient_and_the_teacher_none():
    torch.manual_seed(1)
    logits = torch.randn(2, 4, 8, requires_grad=True)
    teacher = torch.randn(2, 4, 8, requires_grad=True)
    tokens = torch.randint(0, 8, (2, 4))
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)  # row 0 ends early
    target = torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0]], dtype=torch.bool)  # one hinted turn
    total, parts = rl_loss(logits, tokens, torch.zeros(2, 4), mask, torch.tensor([1.0, 0.0]),
                           torch.tensor([0, 0]), teacher_logits=teacher, target_mask=target,
                           cfg=LossConfig(distill="full"))
    total.backward()
    assert logits.grad[0, 2:].abs().sum() == 0  # not the policy's tokens
    assert teacher.grad is None or teacher.grad.abs().sum() == 0
    assert parts["targeted_tokens"] == 2 and parts["distill"] != 0


def test_distillation_touches_only_the_targeted_turn():
    torch.manual_seed(2)
    logits = torch.randn(1, 6, 8, requires_grad=True)
    teacher = torch.randn(1, 6, 8)
    tokens = torch.randint(0, 8, (1, 6))
    target = torch.tensor([[0, 0, 1, 1, 0, 0]], dtype=torch.bool)
    distill_loss(logits, teacher, tokens, target, LossConfig(distill="sampled")).backward()
    assert logits.grad[0, [0, 1, 4, 5]].abs().sum() == 0 and logits.grad[0, 2:4].abs().sum() > 0


def test_insert_hint_maps_student_tokens_to_the_teacher_sequence():
    teacher, where = insert_hint([5, 6, 7, 8], 2, [1, 1, 1])
    assert teacher == [5, 6, 1, 1, 1, 7, 8]
    assert [teacher[p] for p in where] == [5, 6, 7, 8]

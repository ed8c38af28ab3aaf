"""In one process, ShardedMuon is per-matrix Muon at the configured granularity, and AdamW.

Pins: Newton-Schulz maps matrices near orthogonal; ShardedMuon on plain tensors equals a
plain loop over matrices (whole, per head by rows or columns, per expert) over several steps;
the granularity changes the result; its AdamW groups equal torch.optim.AdamW bit for bit; bad
settings fail when the optimizer is built, naming the fix.
"""

import pytest

torch = pytest.importorskip("torch")

from trainer_helpers import MUON_SPECS as SPECS  # noqa: E402
from trainer_helpers import reference_muon  # noqa: E402

from featdel.trainer.newton_schulz import newton_schulz, newton_schulz_flops  # noqa: E402
from featdel.trainer.optim import ShardedMuon  # noqa: E402


def test_newton_schulz_orthogonalises_wide_and_tall_batches():
    g = torch.Generator().manual_seed(0)
    for shape in [(3, 8, 20), (3, 20, 8), (1, 16, 16)]:
        sv = torch.linalg.svdvals(newton_schulz(torch.randn(*shape, generator=g)))
        assert sv.min() > 0.6 and sv.max() < 1.25, (shape, sv)


def test_flop_count_matches_the_kimi_k2_expert_estimate():
    # 69,120 routed-expert matrices of 2048 x 7168: about 4.75e16 FLOPs (anchors.md).
    assert abs(69_120 * newton_schulz_flops(2048, 7168) - 4.75e16) < 0.01e16


def _params(seed=0):
    g = torch.Generator().manual_seed(seed)
    return {n: torch.randn(*s, generator=g) for n, (s, _, _) in SPECS.items()}


def _grads(steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [[torch.randn(*s, generator=g) for s, _, _ in SPECS.values()] for _ in range(steps)]


def _groups(params, lr=0.05, wd=0.1, override=None):
    groups = []
    for n, p in params.items():
        _, gran, hd = SPECS[n]
        gran, hd = (override or {}).get(n, (gran, hd))
        groups.append({"params": [p], "granularity": gran, "head_dim": hd})
    return ShardedMuon(groups, lr=lr, weight_decay=wd)


@pytest.mark.parametrize("bucket_numel", [1 << 20, 200])
def test_unsharded_step_equals_per_matrix_reference(bucket_numel):
    params, grads = _params(), _grads(3)
    want = reference_muon(list(params.values()), grads, [(s[1], s[2]) for s in SPECS.values()], lr=0.05, wd=0.1)
    ps = {n: torch.nn.Parameter(p.clone()) for n, p in params.items()}
    opt = _groups(ps)
    opt.bucket_numel = bucket_numel
    for step in grads:
        for p, g in zip(ps.values(), step):
            p.grad = g.clone()
        opt.step()
    for (n, p), w in zip(ps.items(), want):
        assert torch.allclose(p.detach(), w, atol=1e-5, rtol=0), n
    assert opt.last_step_bytes == 0


def test_granularity_changes_the_update():
    params, grads = _params(), _grads(1)
    out = []
    for override in [None, {"q": ("matrix", None), "experts": ("matrix", None)}]:
        ps = {n: torch.nn.Parameter(p.clone()) for n, p in params.items()}
        opt = _groups(ps, override=override)
        for p, g in zip(ps.values(), grads[0]):
            p.grad = g.clone()
        opt.step()
        out.append(ps)
    for n in ("q", "experts"):
        assert (out[0][n] - out[1][n]).abs().max() > 1e-3, n
    assert torch.equal(out[0]["w"], out[1]["w"])


def test_adamw_groups_equal_torch_adamw_bit_for_bit():
    g = torch.Generator().manual_seed(2)
    a = [torch.nn.Parameter(torch.randn(5, 3, generator=g)), torch.nn.Parameter(torch.randn(7, generator=g))]
    b = [torch.nn.Parameter(p.detach().clone()) for p in a]
    ours = ShardedMuon([{"params": a, "algorithm": "adamw"}], lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95))
    ref = torch.optim.AdamW(b, lr=1e-2, weight_decay=0.1, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    for _ in range(4):
        grads = [torch.randn(p.shape, generator=g) for p in a]
        for p, q, gr in zip(a, b, grads):
            p.grad, q.grad = gr.clone(), gr.clone()
        ours.step()
        ref.step()
    for p, q in zip(a, b):
        assert torch.equal(p, q)


@pytest.mark.parametrize("kwargs, message", [
    ({"granularity": "row"}, "granularity 'row' is unknown"),
    ({"granularity": "head_rows", "head_dim": 5}, "not a multiple of head_dim=5"),
    ({"granularity": "head_rows"}, "head_dim > 0"),
    ({"algorithm": "sgd"}, "use 'muon' or 'adamw'"),
    ({"momentum": 1.0}, "0 <= momentum < 1"),
])
def test_bad_settings_fail_when_built(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ShardedMuon([torch.nn.Parameter(torch.zeros(8, 4))], **kwargs)


def test_vectors_are_refused_by_muon():
    with pytest.raises(ValueError, match="give it to AdamW"):
        ShardedMuon([torch.nn.Parameter(torch.zeros(8))])

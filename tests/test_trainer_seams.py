"""The trainer's seams: losses outside the model, a data-source interface, `train_step`, and
sampling with a KV cache.

Pins: decoding one token at a time through the cache gives the same logits as a full forward;
`sample` returns the log-probabilities a full forward assigns to the sampled tokens, is
deterministic for a seed, and greedy sampling is the argmax; a masked token contributes no loss
and no gradient, and an all-masked batch gives 0, not NaN; `train` on the default byte corpus
is exactly `train_step` over `ByteCorpus` batches, and a custom data source with a mask trains.
"""

import pytest

torch = pytest.importorskip("torch")

from featdel.trainer.data import Batch, ByteCorpus  # noqa: E402
from featdel.trainer.losses import next_token_loss, token_logprobs  # noqa: E402
from featdel.trainer.model import KVCache, Transformer  # noqa: E402
from featdel.trainer.sampling import sample  # noqa: E402
from featdel.trainer.train import TrainConfig, build, train, train_step  # noqa: E402


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return Transformer("debug").eval()


def test_cached_decoding_equals_a_full_forward(model):
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(tokens)
        cache = KVCache(len(model.layers))
        steps = [model(tokens[:, :5], cache)] + [model(tokens[:, i:i + 1], cache) for i in range(5, 12)]
    assert cache.length == 12
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_sample_logprobs_match_a_full_forward_and_seeds_repeat(model):
    prompt = torch.tensor([list(b"def f(x):"), list(b"return 1;")])
    got = sample(model, prompt, 6, temperature=1.0, seed=3)
    assert got.tokens.shape == (2, 6) and got.logprobs.shape == (2, 6)
    with torch.no_grad():
        logits = model(torch.cat([prompt, got.tokens], dim=1))[:, prompt.shape[1] - 1:-1]
    assert torch.allclose(token_logprobs(logits, got.tokens), got.logprobs, atol=1e-5)
    assert torch.equal(sample(model, prompt, 6, seed=3).tokens, got.tokens)
    greedy = sample(model, prompt[:, :4], 1, temperature=0)
    with torch.no_grad():
        assert torch.equal(greedy.tokens[:, 0], model(prompt[:, :4])[:, -1].argmax(-1))


def test_masked_tokens_get_no_loss_and_no_gradient():
    logits = torch.randn(2, 5, 256, requires_grad=True)
    targets = torch.randint(0, 256, (2, 5))
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[:, 3:] = True
    loss = next_token_loss(logits, targets, mask)
    loss.backward()
    assert logits.grad[:, :3].abs().sum() == 0 and logits.grad[:, 3:].abs().sum() > 0
    want = torch.nn.functional.cross_entropy(logits[:, 3:].reshape(-1, 256), targets[:, 3:].reshape(-1))
    assert torch.allclose(loss, want)
    empty = next_token_loss(logits, targets, torch.zeros(2, 5, dtype=torch.bool))
    assert empty.item() == 0.0 and torch.isfinite(empty)


def test_train_is_train_step_over_the_byte_corpus():
    cfg = TrainConfig(steps=2, batch_size=4, seq_len=16)
    want = train(cfg, None, log=None).losses
    model, opt = build(cfg)
    corpus = ByteCorpus(batch_size=4, seq_len=16, seed=cfg.seed)
    assert [train_step(model, opt, corpus.batch(s)).item() for s in range(2)] == want


class HalfMasked:
    """A custom source: only the second half of each row is trained on."""

    def batch(self, step):
        g = torch.Generator().manual_seed(step)
        x = torch.randint(0, 256, (4, 17), generator=g)
        mask = torch.zeros(4, 16, dtype=torch.bool)
        mask[:, 8:] = True
        return Batch(inputs=x[:, :-1], targets=x[:, 1:], mask=mask)


def test_a_custom_data_source_with_a_mask_trains():
    result = train(TrainConfig(steps=2, batch_size=4, seq_len=16), None, log=None, data=HalfMasked())
    assert all(torch.isfinite(torch.tensor(x)) for x in result.losses)

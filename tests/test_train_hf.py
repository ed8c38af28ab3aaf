"""`featdel train --model PATH`: a local Hugging Face checkpoint as the policy (transformers).

The checkpoint is built here from a config (a 2-layer Llama) with a byte-level BPE tokenizer
trained in the test on featdel's README, so nothing is downloaded. Pins: sampling through the
wrapper's cache scores each token as a full forward does (the log-probabilities the update
trusts); a turn ends at the first token holding a newline, whatever else the token holds; the
trainer runs a step on the packaged tiny run with finite losses and writes a checkpoint that
`featdel solve --policy` loads back (its `load_policy`) with the same weights, and a rerun with
more steps resumes from it (it starts at step 1, keeps the metric line before it, takes step 2).
"""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

FEATDEL = str(Path(sys.executable).parent / "featdel")


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = tmp_path_factory.mktemp("hf-tiny")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    text = (Path(__file__).parents[1] / "README.md").read_text()
    tok.train_from_iterator([text], trainers.BpeTrainer(vocab_size=600, special_tokens=["<eos>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>")
    fast.save_pretrained(out)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=16384)
    LlamaForCausalLM(cfg).save_pretrained(out)
    return out


def test_cached_sampling_matches_a_full_forward_and_turns_end_at_a_newline_token(hf_dir):
    from featdel.trainer.hf import load
    from featdel.trainer.policy import TransformerPolicy

    model, codec = load(hf_dir)
    stops = [i for i in range(codec.vocab) if codec.is_stop(i)]
    assert stops and all("\n" in codec.decode([i]) for i in stops)
    assert any(codec.decode([i]) != "\n" for i in stops) or len(stops) == 1
    policy = TransformerPolicy(model, codec=codec)
    context = codec.encode("A feature was removed. Restore it.\n")
    ids, logprobs = policy.act(context, max_tokens=24, seed=3)
    assert all(not codec.is_stop(i) for i in ids[:-1])
    with torch.no_grad():
        full = torch.log_softmax(model(torch.tensor([context + ids])).float(), -1)[0]
    for j, (tok, lp) in enumerate(zip(ids, logprobs, strict=True)):
        assert abs(full[len(context) + j - 1, tok].item() - lp) < 1e-4


def test_train_a_hugging_face_checkpoint_and_load_it_as_a_policy(hf_dir, packaged_tiny, tmp_path):
    from featdel.trainer.hf import load
    from featdel.trainer.policy_io import load_policy

    out = tmp_path / "hf"

    def train(steps: int) -> subprocess.CompletedProcess:
        done = subprocess.run([FEATDEL, "train", str(packaged_tiny), "--preset", "debug", "--steps", str(steps),
                               "--out", str(out), "--db", str(tmp_path / "c.duckdb"), "--model", str(hf_dir)],
                              capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    train(1)
    [row] = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert row["trajectories"] == 4 and math.isfinite(row["loss"])
    policy = load_policy(out)
    start, _ = load(hf_dir)
    trained = dict(policy.model.named_parameters())
    assert policy.codec.vocab == start.hf.config.vocab_size
    assert any(not torch.equal(p, trained[n]) for n, p in start.named_parameters())  # a step was taken
    ids, _ = policy.act(policy.codec.encode("Restore it.\n"), max_tokens=8, seed=0)
    assert ids
    assert "start=1" in train(2).stdout
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["trajectories"] == 4 for r in rows)
    assert (out / "checkpoints" / "latest").read_text().strip() == "step-000002"


def test_a_folder_without_a_checkpoint_is_one_line(tmp_path, packaged_tiny):
    done = subprocess.run([FEATDEL, "train", str(packaged_tiny), "--out", str(tmp_path / "o"),
                           "--db", str(tmp_path / "c.duckdb"), "--model", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "not a Hugging Face checkpoint folder" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1

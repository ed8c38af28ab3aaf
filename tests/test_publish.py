"""A packaged run round-trips through the Hub layout.

Pins: `featdel publish --dry-run DIR` writes a folder that `datasets.load_dataset(DIR)` reads
back as exactly the packaged task rows (the default config) and env rows (`envs`), with a card
that carries the YAML configs, counts per repo and strategy, licences and how to grade;
`featdel fetch` of a folder laid out as the Hub serves it gives a run directory that
`materialize` and `evaluate` accept (gold resolves there); without HF_TOKEN, or with a Hub that
does not answer, publishing is a one-line error and nothing is left half-done.
The Hub itself cannot be reached from these machines: the upload and the download from
huggingface.co are not exercised (docs: README, `featdel publish`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from featdel.core.errors import PublishError
from featdel.core.shards import read_envs, read_tasks
from featdel.interop.hub import fetch, publish


@pytest.fixture(scope="module")
def dry(packaged_tiny, tmp_path_factory):
    folder = tmp_path_factory.mktemp("hub") / "dataset"
    publish(packaged_tiny, "my-org/featdel-tiny", dry_run=folder)
    return packaged_tiny, folder


def test_dry_run_loads_in_datasets_as_the_packaged_rows(dry):
    run_dir, folder = dry
    os.environ["HF_HUB_OFFLINE"] = "1"  # before datasets is imported (conftest sets it too)
    import datasets

    # A private cache: the shared one can hold an earlier session's load of a folder at this path.
    cache = str(folder.parent / "hf-cache")
    tasks = datasets.load_dataset(str(folder), split="train", cache_dir=cache)
    envs = datasets.load_dataset(str(folder), "envs", split="train", cache_dir=cache)
    assert tasks.to_list() == read_tasks(run_dir).to_pylist()
    assert envs.to_list() == read_envs(run_dir).to_pylist()
    assert isinstance(tasks[0]["FAIL_TO_PASS"], list)


def test_card_has_configs_counts_licences_and_grading(dry):
    import yaml

    run_dir, folder = dry
    text = (folder / "README.md").read_text()
    header = yaml.safe_load(text.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == ["tasks", "envs", "swebench"]
    assert header["configs"][0]["default"] is True
    n = read_tasks(run_dir).num_rows
    assert {i["config_name"]: i["splits"][0]["num_examples"] for i in header["dataset_info"]} == {
        "tasks": n, "envs": read_envs(run_dir).num_rows, "swebench": n}
    assert {"reinforcement-learning", "rl-environment"} <= set(header["tags"])
    assert f"{n} task{'s' if n != 1 else ''} from " in text and " 1 tasks " not in text
    row = read_tasks(run_dir).to_pylist()[0]
    assert f"| {row['repo']} | " in text and "| licence | body | tasks |" in text
    assert "featdel evaluate run/ --predictions" in text and "featdel env build" in text and "licence" in text


def test_the_swebench_config_is_rows_swebenchs_harness_reads(dry, tmp_path):
    """`load_dataset(DIR, "swebench", split="test")` gives the `--format swebench` rows; written
    out as JSON Lines (the card's one line), swebench's harness builds its test spec from each."""
    import datasets
    from swebench.harness.utils import load_swebench_dataset, make_test_spec

    from featdel.interop.swebench import rows

    run_dir, folder = dry
    rows_here = datasets.load_dataset(str(folder), "swebench", split="test", cache_dir=str(tmp_path / "c"))
    expected, _ = rows(run_dir)
    assert [r["instance_id"] for r in rows_here] == [r["instance_id"] for r in expected]
    rows_here.to_json(str(tmp_path / "sweb.jsonl"))
    for row in load_swebench_dataset(str(tmp_path / "sweb.jsonl"), "test"):
        spec = make_test_spec(row)
        assert spec.image == row["image"] and spec.FAIL_TO_PASS and spec.log_parser.startswith("parse_log_")


def test_fetch_of_a_hub_folder_is_a_run_directory(dry, tmp_path, local_backend):
    run_dir, folder = dry
    out = tmp_path / "fetched"
    assert fetch(str(folder), out) == (read_tasks(run_dir).num_rows, read_envs(run_dir).num_rows)
    assert read_tasks(out).to_pylist() == read_tasks(run_dir).to_pylist()
    from featdel.grading.evaluate import evaluate
    from featdel.interop.materialize import materialize

    row = read_tasks(out).to_pylist()[0]
    materialize(out, row["instance_id"], tmp_path / "start")
    assert (tmp_path / "start" / ".git").is_dir()
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"instance_id": row["instance_id"], "model_patch": row["patch"],
                                 "model_name_or_path": "gold"}) + "\n")
    [result] = evaluate(out, preds, tmp_path / "r.jsonl", local_backend)  # the env mining built, in this cache
    assert result.status == "resolved", result.reason
    with pytest.raises(PublishError, match="not a featdel dataset"):
        fetch(str(tmp_path / "start"), tmp_path / "not-a-dataset")


def _publish_cli(run_dir, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "featdel.cli.main", "publish", str(run_dir), "--repo-id", "my-org/x"],
                          capture_output=True, text=True, timeout=120, env=env)


def test_publish_without_token_or_hub_is_a_one_line_error(packaged_tiny):
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_HUB_OFFLINE")}
    done = _publish_cli(packaged_tiny, env)
    assert done.returncode == 2 and "HF_TOKEN" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    # A token, and a Hub endpoint where nothing listens: the upload fails in one line.
    done = _publish_cli(packaged_tiny, {**env, "HF_TOKEN": "hf_test", "HF_ENDPOINT": "http://127.0.0.1:9"})
    assert done.returncode == 2 and "upload to my-org/x failed" in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr

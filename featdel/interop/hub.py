"""`featdel publish` and `featdel fetch`: a packaged run as a Hugging Face dataset, and back.

In (publish): a packaged run directory. Out: a folder laid out as the Hub serves a dataset,
uploaded with `huggingface_hub` (token from HF_TOKEN), or only written (`dry_run`):

    README.md                 dataset card: YAML `configs` (`tasks`, the default, and `envs`),
                              `dataset_info` features and counts, then counts per repo and
                              strategy, licences, and how to grade a prediction with featdel
    tasks/tasks-NNNNN.parquet the task shards, as `featdel package` wrote them
    envs/envs-NNNNN.parquet   the env shards (snapshot, recipe, lock)

The data files keep the run directory's own paths, so a downloaded copy *is* a run directory:
`featdel fetch` (`huggingface_hub.snapshot_download`, or a local folder in that layout) writes
one that `evaluate`, `materialize`, `show` and `env build` accept as it is.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

from featdel.core.errors import PublishError
from featdel.core.rundir import RunDir
from featdel.core.text import counted

_HUB_LICENSES = {"mit": "mit", "apache-2.0": "apache-2.0", "bsd-3-clause": "bsd-3-clause",
                 "bsd-2-clause": "bsd-2-clause", "isc": "isc", "mpl-2.0": "mpl-2.0", "gpl-3.0": "gpl-3.0",
                 "lgpl-3.0": "lgpl-3.0", "psf-2.0": "other", "unlicense": "unlicense"}
_PATTERNS = ["README.md", "tasks/*.parquet", "envs/*.parquet"]  # what a run directory needs


def write_layout(run_dir: Path, folder: Path, repo_id: str) -> Path:
    """The Hub folder for `run_dir` (replacing an earlier one's data files)."""
    import pyarrow.parquet as pq

    from featdel.core.shards import read_envs, read_tasks

    rd = RunDir(run_dir)
    rd.need(rd.tasks_dir, f"run `featdel package {run_dir}` first")
    rd.need(rd.envs_dir, f"run `featdel package {run_dir}` first")
    tasks, envs = read_tasks(run_dir), read_envs(run_dir)
    for part, source in (("tasks", rd.tasks_dir), ("envs", rd.envs_dir)):
        shutil.rmtree(folder / part, ignore_errors=True)
        (folder / part).mkdir(parents=True)
        for shard in sorted(source.glob(f"{part}-*.parquet")):
            shutil.copyfile(shard, folder / part / shard.name)
    swebench = swebench_table(run_dir)
    shutil.rmtree(folder / "swebench", ignore_errors=True)
    (folder / "swebench").mkdir()
    pq.write_table(swebench, folder / "swebench" / "test-00000.parquet")
    (folder / "README.md").write_text(card(tasks, envs, swebench, repo_id))
    return folder


def swebench_table(run_dir: Path):
    """`featdel export --format swebench`'s rows as one table: the `swebench` config's test split."""
    import pyarrow as pa

    from featdel.interop.swebench import rows

    return pa.Table.from_pylist(rows(run_dir)[0])


def card(tasks, envs, swebench, repo_id: str) -> str:
    """The dataset card: YAML header for the Hub and `datasets`, then what a reader needs."""
    import yaml
    from datasets import Features

    rows, env_rows = tasks.to_pylist(), envs.select([c for c in envs.column_names if c != "snapshot"]).to_pylist()
    licences = {e["repo"]: e.get("license") or "unknown" for e in env_rows}
    hub_ids = {_HUB_LICENSES.get(str(v).lower(), "other") for v in licences.values()}
    configs, info = [], []
    for name, split, table, default in (("tasks", "train", tasks, True), ("envs", "train", envs, False),
                                        ("swebench", "test", swebench, False)):
        configs.append({"config_name": name, **({"default": True} if default else {}),
                        "data_files": [{"split": split, "path": f"{name}/*.parquet"}]})
        info.append({"config_name": name, "features": Features.from_arrow_schema(table.schema)._to_yaml_list(),
                     "splits": [{"name": split, "num_bytes": table.nbytes, "num_examples": table.num_rows}],
                     "dataset_size": table.nbytes})
    header = {"pretty_name": repo_id.split("/")[-1], "license": hub_ids.pop() if len(hub_ids) == 1 else "other",
              "tags": ["code", "software-engineering", "reinforcement-learning", "rl-environment", "agents",
                       "swe-bench", "featdel"],
              "task_categories": ["text-generation", "reinforcement-learning"], "configs": configs, "dataset_info": info}
    counts = Counter((r["repo"], r["strategy"]) for r in rows)
    strategies = sorted({s for _, s in counts})
    repos = sorted({r for r, _ in counts} | set(licences))
    table = ["| repo | licence | " + " | ".join(strategies) + " | tasks |",
             "|---|---|" + "---|" * len(strategies) + "---|"]
    for repo in repos:
        per = [counts.get((repo, s), 0) for s in strategies]
        table.append(f"| {repo} | {licences.get(repo, 'unknown')} | " + " | ".join(map(str, per)) + f" | {sum(per)} |")
    features = "\n".join(f"| `{f.name}` | `{f.type}` |" for f in tasks.schema)
    return f"""---
{yaml.safe_dump(header, sort_keys=False, width=120).strip()}
---

# {repo_id}

Coding tasks made by featdel through *feature deletion*: a tested
feature of a real Python library is removed so the library still imports and its tests still
run; the tests that now fail (`FAIL_TO_PASS`) are the reward, and the rest of its passing suite
(`PASS_TO_PASS`) must keep passing. Every task was verified: its start state fails every
FAIL_TO_PASS test, the gold `patch` makes them and PASS_TO_PASS pass, and a trivial body does not.

{counted(len(rows), "task")} from {counted(len(repos), "repository")}, in three configs:

- `tasks` (default): one row per task, SWE-bench's columns where they overlap (`patch` is the
  gold fix, `deletion_patch` takes the original tree to the start state, `test_patch` is applied
  before grading; FAIL_TO_PASS and PASS_TO_PASS are lists).
- `envs`: one row per environment: the original tree (`snapshot`, tar.gz), the recipe, and the
  `lock` of exact distributions that `featdel env build` reinstalls.
- `swebench` (split `test`): the same tasks as SWE-bench rows (`featdel export --format swebench`):
  `image`, `log_parser`, `eval_type` and a self-contained `eval_script` for SWE-bench's harness.

## Tasks per repository and strategy

{chr(10).join(table)}

Each source keeps its own licence (above, from its package metadata or LICENSE file); the
tasks are derived from that code and are distributed under it.

## Use

```python
import datasets
tasks = datasets.load_dataset("{repo_id}", split="train")          # the `tasks` config
envs = datasets.load_dataset("{repo_id}", "envs", split="train")
```

## Grade a prediction with featdel

```
featdel fetch {repo_id} --out run/             # a run directory: tasks/ and envs/
featdel env build run/                          # or --sandbox docker: image featdel-env:<env_id>
featdel evaluate run/ --predictions preds.jsonl --out results.jsonl
```

Predictions use SWE-bench's format (`instance_id`, `model_patch`, `model_name_or_path`).

## Grade with SWE-bench's harness

```
featdel fetch {repo_id} --out run/ && featdel env build run/ --sandbox docker --tasks   # the images
python -c "import datasets; datasets.load_dataset('{repo_id}', 'swebench', split='test').to_json('sweb.jsonl')"
python -m swebench.harness.run_evaluation --dataset_name sweb.jsonl --predictions_path preds.jsonl --run_id r1
```
`featdel export run/ --format swebench` and `--format harbor` write SWE-bench rows with a
self-contained `eval_script`, and Harbor task folders.

## Task columns

| column | type |
|---|---|
{features}
"""


def publish(run_dir: Path, repo_id: str, *, private: bool = False, dry_run: Path | None = None) -> Path:
    """Write the Hub layout (to `dry_run`, and stop there) or upload it; return the folder."""
    import tempfile

    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise PublishError(f"--repo-id {repo_id!r}: give ORG/NAME, e.g. my-org/featdel-tasks")
    if dry_run is not None:
        return write_layout(run_dir, dry_run, repo_id)
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise PublishError("HF_TOKEN is not set: export a Hugging Face write token, or pass --dry-run DIR")
    with tempfile.TemporaryDirectory(prefix="featdel-publish-") as tmp:
        folder = write_layout(run_dir, Path(tmp), repo_id)
        try:
            from huggingface_hub import HfApi

            api = HfApi(token=token)
            api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
            api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="dataset",
                              commit_message="featdel publish")
        except Exception as exc:  # hub, network and auth errors come in many types
            raise PublishError(f"upload to {repo_id} failed: {type(exc).__name__}: {_one_line(exc)}") from exc
    return folder


def fetch(source: str, out: Path) -> tuple[int, int]:
    """Download a published dataset (ORG/NAME, or a local folder in the Hub's layout) into run
    directory `out`; return (tasks, envs)."""
    from featdel.core.shards import read_envs, read_tasks

    local = Path(source).expanduser()
    if local.is_dir():
        for pattern in _PATTERNS:
            for path in local.glob(pattern):
                dest = out / path.relative_to(local)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, dest)
    else:
        try:
            from huggingface_hub import snapshot_download

            snapshot_download(repo_id=source, repo_type="dataset", local_dir=str(out), allow_patterns=_PATTERNS,
                              token=os.environ.get("HF_TOKEN") or None)
        except Exception as exc:
            raise PublishError(f"cannot download {source}: {type(exc).__name__}: {_one_line(exc)}") from exc
    rd = RunDir(out)
    if not any(rd.tasks_dir.glob("*.parquet")) or not any(rd.envs_dir.glob("*.parquet")):
        raise PublishError(f"{source} has no tasks/*.parquet and envs/*.parquet: not a featdel dataset")
    return read_tasks(out).num_rows, read_envs(out).num_rows


def _one_line(exc: Exception) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return (lines[0] if lines else "no message")[:240]

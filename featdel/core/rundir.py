"""The run directory: its layout and its records, owned here so no stage or command spells a
file name.

In: a path. Out: `RunDir`, whose properties name every file and folder a stage writes and whose
methods read and append the typed records (JSON Lines, one record per line, appended and
flushed, so an interrupted run keeps what it finished):

    repos.jsonl                 RepoRecord per mining attempt (the last one of a source counts)
    repos/NAME/                 baseline.json, coverage.json, snapshot.tar.gz, deleted.done
    deletions.jsonl             Deletion
    verdicts.jsonl              Verdict (strategies' refusals, rejections, broken, verified)
    steering.jsonl              Steering per deletion whose knobs a learner's model chose
    options.json                the options each stage ran with
    progress.jsonl              one line per phase a repository enters while it is mined (when,
                                which source, which phase): where a long run is, read back by
                                `tail` or `featdel status`-like tools, never by a stage
    tasks/*.parquet, envs/*.parquet

Resuming with different options would mix two runs into one: `stage_options` records what a
stage ran with, and a later run of that stage with other options is refused with a message
that names the difference, instead of silently doing nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from featdel.core.errors import RunDirError
from featdel.core.records import (
    Baseline,
    Deletion,
    RepoRecord,
    RepoStatus,
    Steering,
    Verdict,
    append_jsonl,
    read_jsonl,
)


@dataclass(frozen=True, slots=True)
class RunDir:
    root: Path

    @property
    def repos_jsonl(self) -> Path:
        return self.root / "repos.jsonl"

    @property
    def deletions_jsonl(self) -> Path:
        return self.root / "deletions.jsonl"

    @property
    def verdicts_jsonl(self) -> Path:
        return self.root / "verdicts.jsonl"

    @property
    def options_json(self) -> Path:
        return self.root / "options.json"

    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @property
    def envs_dir(self) -> Path:
        return self.root / "envs"

    def repo_dir(self, name: str) -> Path:
        return self.root / "repos" / name

    def snapshot(self, name: str) -> Path:
        return self.repo_dir(name) / "snapshot.tar.gz"

    def baseline(self, name: str) -> Path:
        return self.repo_dir(name) / "baseline.json"

    def coverage(self, name: str) -> Path:
        return self.repo_dir(name) / "coverage.json"

    def deleted_marker(self, name: str) -> Path:
        return self.repo_dir(name) / "deleted.done"

    # Records.
    def latest_repos(self) -> dict[str, RepoRecord]:
        """The last record of each source (a retried repo appends a new line)."""
        return {r.source: r for r in read_jsonl(self.repos_jsonl, RepoRecord)}

    def mined(self) -> list[RepoRecord]:
        return [r for r in self.latest_repos().values() if r.status == RepoStatus.MINED]

    def deletions(self) -> list[Deletion]:
        return read_jsonl(self.deletions_jsonl, Deletion)

    def verdicts(self) -> list[Verdict]:
        return read_jsonl(self.verdicts_jsonl, Verdict)

    def add_repo(self, record: RepoRecord) -> None:
        append_jsonl(self.repos_jsonl, record)

    def add_deletion(self, deletion: Deletion) -> None:
        append_jsonl(self.deletions_jsonl, deletion)

    def add_verdict(self, verdict: Verdict) -> None:
        append_jsonl(self.verdicts_jsonl, verdict)

    @property
    def progress_jsonl(self) -> Path:
        return self.root / "progress.jsonl"

    def add_progress(self, stage: str, item: str, step: str) -> None:
        """One line saying `item` entered `step` of `stage` now (UTC)."""
        from datetime import datetime, timezone

        when = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.root.mkdir(parents=True, exist_ok=True)
        with self.progress_jsonl.open("a") as fh:
            fh.write(json.dumps({"at": when, "stage": stage, "item": item, "step": step}) + "\n")

    @property
    def steering_jsonl(self) -> Path:
        return self.root / "steering.jsonl"

    def steering(self) -> dict[str, Steering]:
        return {s.deletion_id: s for s in read_jsonl(self.steering_jsonl, Steering)}

    def add_steering(self, steering: Steering) -> None:
        append_jsonl(self.steering_jsonl, steering)

    def load_baseline(self, name: str) -> Baseline:
        return Baseline.load(self.baseline(name))

    def recorded(self, stage: str) -> dict[str, Any]:
        """The options `stage` last ran with (`stage_options`), {} when it has not run."""
        return json.loads(self.options_json.read_text()).get(stage, {}) if self.options_json.exists() else {}

    def need(self, path: Path, how: str) -> None:
        """A one-line error naming the stage to run when a stage's input is missing."""
        if not path.exists():
            raise RunDirError(f"{path} is missing: {how}")

    # Options.
    def stage_options(self, stage: str, options: dict[str, Any], *, started: bool,
                      speed_only: frozenset[str] = frozenset()) -> None:
        """Record `options` for `stage`; refuse when the stage has `started` (left output) with
        other options. JSON-normalised so lists and tuples compare equal. `speed_only`: options
        that change how fast the stage runs, never what it decides: a run may resume with other
        values, or with a version that added or dropped one."""
        options = json.loads(json.dumps(options, sort_keys=True, default=str))
        recorded = json.loads(self.options_json.read_text()) if self.options_json.exists() else {}
        before = recorded.get(stage)
        keys = (set(before or {}) | set(options)) - speed_only
        if started and before is not None and any(before.get(k) != options.get(k) for k in keys):
            diff = ", ".join(f"{k}={before.get(k)!r} (now {options.get(k)!r})"
                             for k in sorted(keys) if before.get(k) != options.get(k))
            raise RunDirError(f"{self.root} was {stage} with {diff}; resume with the same options "
                              "or give a new --out")
        recorded[stage] = options
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.options_json.with_suffix(".tmp")
        tmp.write_text(json.dumps(recorded, indent=1, sort_keys=True))
        tmp.replace(self.options_json)

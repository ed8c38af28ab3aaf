"""A run directory remembers each stage's options: resuming a stage that has started with other
options is refused with a one-line error naming the difference; the same options resume."""

from __future__ import annotations

import pytest

from featdel.core.errors import RunDirError
from featdel.core.rundir import RunDir


def test_a_started_stage_refuses_other_options_and_accepts_the_same(tmp_path):
    rd = RunDir(tmp_path / "run")
    rd.stage_options("verified", {"reruns": 3, "seed": 0}, started=False)
    rd.stage_options("verified", {"reruns": 3, "seed": 0}, started=True)
    with pytest.raises(RunDirError, match=r"reruns=3 \(now 5\)"):
        rd.stage_options("verified", {"reruns": 5, "seed": 0}, started=True)
    rd.stage_options("verified", {"reruns": 5, "seed": 0}, started=False)  # nothing done yet: re-recorded
    assert "5" in rd.options_json.read_text()


def test_missing_stage_input_names_the_command_to_run(tmp_path):
    rd = RunDir(tmp_path)
    with pytest.raises(RunDirError, match="run `featdel delete DIR` first"):
        rd.need(rd.deletions_jsonl, "run `featdel delete DIR` first")

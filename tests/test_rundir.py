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


def test_options_that_only_change_speed_never_stop_a_resume(tmp_path):
    rd = RunDir(tmp_path / "run")
    fast = frozenset({"bytecode", "merge"})
    rd.stage_options("verified", {"reruns": 3, "bytecode": True}, started=False, speed_only=fast)
    # another value, a key added or dropped by a newer version: all resume
    rd.stage_options("verified", {"reruns": 3, "bytecode": False, "merge": True}, started=True, speed_only=fast)
    rd.stage_options("verified", {"reruns": 3}, started=True, speed_only=fast)
    with pytest.raises(RunDirError, match=r"reruns=3 \(now 4\)"):
        rd.stage_options("verified", {"reruns": 4, "bytecode": True}, started=True, speed_only=fast)


def test_missing_stage_input_names_the_command_to_run(tmp_path):
    rd = RunDir(tmp_path)
    with pytest.raises(RunDirError, match="run `featdel delete DIR` first"):
        rd.need(rd.deletions_jsonl, "run `featdel delete DIR` first")

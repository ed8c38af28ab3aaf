"""End to end on a real PyPI sdist through the CLI: `featdel run` mines inflection 0.5.1,
yields verified tasks, a second run reuses the environment and every finished stage, and a run
with other options is refused rather than silently mixed in."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_tasks_round_trip

pytestmark = pytest.mark.slow
FEATDEL = [sys.executable, "-m", "featdel.cli.main"]


def featdel(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*FEATDEL, *args], capture_output=True, text=True, timeout=900, cwd=cwd)


def test_run_on_a_real_sdist_and_resume(tmp_path, featdel_cache):
    out = tmp_path / "run"
    # A relative --out, as a user types it (every stage must resolve it, whatever its cwd).
    first = featdel("run", "pypi:inflection==0.5.1", "--out", "run", "--max-candidates", "3", "-s", "body",
                    "-s", "function", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]
    [record] = [json.loads(line) for line in (out / "repos.jsonl").read_text().splitlines()]
    assert record["status"] == "mined" and record["passed"] > 400
    coverage = json.loads((out / "repos" / record["name"] / "coverage.json").read_text())
    assert any(s["tests"] for s in coverage["symbols"])
    verdicts = (out / "verdicts.jsonl").read_text().splitlines()
    assert any(json.loads(v)["status"] == "verified" for v in verdicts)
    assert re.search(r"\d+ tasks? in ", first.stdout), first.stdout[-2000:]
    from featdel.sandboxes import get_backend

    assert assert_tasks_round_trip(out, get_backend("local"), tmp_path / "check") >= 1

    env_dir = Path(record["env_dir"])
    stamp = (env_dir / "ready.json").stat().st_mtime_ns
    second = featdel("run", "pypi:inflection==0.5.1", "--out", str(out), "--max-candidates", "3", "-s", "body",
                     "-s", "function")
    assert second.returncode == 0, second.stderr[-2000:]
    assert (env_dir / "ready.json").stat().st_mtime_ns == stamp  # environment reused
    assert (out / "verdicts.jsonl").read_text().splitlines() == verdicts  # nothing re-verified
    assert len((out / "repos.jsonl").read_text().splitlines()) == 1  # nothing re-mined
    # Resuming with other options would silently do nothing: it is refused, naming the difference.
    other = featdel("run", "pypi:inflection==0.5.1", "--out", str(out), "--max-candidates", "3")
    assert other.returncode == 2 and "strategies=['body', 'function']" in other.stderr, other.stderr


def test_cli_errors_are_one_line(tmp_path):
    bad = featdel("delete", str(tmp_path / "nothing"))
    assert bad.returncode == 2
    assert bad.stderr.strip().startswith("error:") and len(bad.stderr.strip().splitlines()) == 1
    nothing = featdel("mine", "/definitely/missing", "--out", str(tmp_path / "m"))
    assert nothing.returncode == 1
    assert "no such directory" in nothing.stdout

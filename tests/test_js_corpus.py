"""corpora/js.toml says what was checked, and it still holds: every entry is pinned (an npm
version or a git commit), names its runner and its counts in the comment above it, and the
corpus spans both languages' sources and at least three runners. The slow test reruns each
entry's suite in the sandbox, where its source can be reached (npm always; a git URL where
GitHub or a mirror mapped with git's `url.*.insteadOf` answers), and checks the runner featdel
detects, the tests that pass and that none fails.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from featdel.env import corpus

CORPUS = Path(__file__).resolve().parents[1] / "corpora" / "js.toml"
RUNNERS = {"tape": "tape", "mocha": "mocha", "jest": "jest", "vitest": "vitest", "node --test": "node-test"}
PINNED = re.compile(r"^(npm:(@[\w.-]+/)?[\w.-]+@\d[\w.+-]*|https://github\.com/[\w.-]+/[\w.-]+@[0-9a-f]{40})$")
CLAIM = re.compile(r"^# (?P<runner>tape|mocha|jest|vitest|node --test)\b.*?(?P<passed>\d+) passed, (?P<failed>\d+) failed")


def claims() -> dict[str, dict]:
    """source -> the check its comment records: runner, passed, failed (the first comment line
    of the block above the entry)."""
    out, block = {}, []
    for line in CORPUS.read_text().splitlines():
        if line.startswith("#"):
            block.append(line)
        elif match := re.match(r'^source = "(.+)"$', line):
            found = next((m for m in map(CLAIM.match, block) if m), None)
            out[match[1]] = found and {"runner": RUNNERS[found["runner"]], "passed": int(found["passed"]),
                                       "failed": int(found["failed"])}
        elif not line.strip():
            block = []
    return out


def test_every_entry_is_pinned_and_says_what_its_check_found():
    sources = [e.source for e in corpus.load(CORPUS)]
    assert len(sources) >= 6 and len(set(sources)) == len(sources)
    assert all(PINNED.match(s) for s in sources), [s for s in sources if not PINNED.match(s)]
    found = claims()
    assert set(found) == set(sources)
    assert all(found[s] is not None for s in sources), [s for s in sources if found[s] is None]
    assert len({c["runner"] for c in found.values()}) >= 3
    assert any(s.startswith("npm:") for s in sources)  # CI can fetch these
    assert all(c["failed"] == 0 and c["passed"] >= 10 for c in found.values())


def reachable(source: str) -> bool:
    if source.startswith("npm:"):
        return shutil.which("npm") is not None
    url = source.rsplit("@", 1)[0]
    try:
        done = subprocess.run(["git", "ls-remote", "--exit-code", url, "HEAD"], capture_output=True, timeout=30,
                              stdin=subprocess.DEVNULL, env={**os.environ, "GIT_TERMINAL_PROMPT": "0"})
    except (subprocess.TimeoutExpired, OSError):
        return False
    return done.returncode == 0


@pytest.mark.slow
@pytest.mark.parametrize("source", sorted(claims()))
def test_the_suite_still_passes_in_the_sandbox(source, tmp_path, featdel_cache):
    """Uses the session's featdel cache: one install per entry, reused by later tests."""
    if shutil.which("node") is None or not reachable(source):
        pytest.skip(f"{source} cannot be reached here (map a mirror with git's url.*.insteadOf, see corpora/js.toml)")
    from featdel.env.sources import checkout, resolve
    from featdel.env.testrun import RunOptions
    from featdel.lang import detect_language
    from featdel.lang.javascript import envs, runners
    from featdel.sandboxes.local import LocalBackend

    backend = LocalBackend()
    if reason := backend.unavailable():
        pytest.skip(reason)
    claim = claims()[source]
    pinned = resolve(source)
    tree = tmp_path / "tree"
    checkout(pinned, tree)
    assert detect_language(tree).name == "javascript"
    recipe = envs.recipe(tree)
    assert recipe.test_cmd[0] == claim["runner"]
    env = envs.build_env(pinned, recipe)
    got = runners.run_suite(env, backend, RunOptions(timeout_s=300))
    assert got.broken is None, got.output_tail
    assert len(got.passed()) == claim["passed"], got.output_tail
    assert not [t for t, o in got.outcomes.items() if o in ("failed", "error")]

"""A strategy check that can also run tests on the edited tree, for the `agent` strategy.

In: the strategies' check factory (`featdel.pipeline.context.make_check`: original tree -> check), the repo's
verify context (environment, image, baseline timing) and the sandbox backend. Out: a factory
whose checks answer as before when called and also have `run_tests(edits, tests)` -> outcome per
test id ("passed", "failed", "error", "not collected", ...). The agent's `check` tool uses it to
tell the model which covering tests its edit makes fail, so it can see that the feature is gone
before verification decides. Tests run in the run's sandbox, as in verify, on a fresh copy.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from featdel.deletion.base import Check, Edits

CONTINUE = ["--continue-on-collection-errors"]  # a module importing a deleted name must not stop the rest


class TestedCheck:
    """`check(edits)` as the wrapped check; `run_tests(edits, tests)` runs tests on the edit."""

    def __init__(self, check: Check, original: Path, ctx, backend):
        self.check, self.original, self.ctx, self.backend = check, Path(original), ctx, backend

    def __call__(self, edits: Edits) -> bool | str:
        return self.check(edits)

    def run_tests(self, edits: Edits, tests: list[str]) -> dict[str, str]:
        from featdel.code import trees
        from featdel.core.errors import SandboxError
        from featdel.env.testrun import RunOptions, run_suite

        timeout = max(60.0, 10 * self.ctx.record.suite_seconds)
        with tempfile.TemporaryDirectory(prefix="featdel-agent-tests-") as tmp:
            tree = Path(tmp) / "t"
            shutil.copytree(self.original, tree, symlinks=True)
            trees.apply_edits(tree, edits)
            run = run_suite(self.ctx.env, self.backend, RunOptions(tests=tests, timeout_s=timeout, extra_args=CONTINUE),
                            tree=tree, image=self.ctx.image)
        if run.timed_out:
            return dict.fromkeys(tests, f"timed out after {timeout:.0f}s")
        if run.broken:
            raise SandboxError(f"the test run broke: {run.broken}")
        return {t: run.outcomes.get(t, "error") if t in run.collected else "not collected" for t in tests}


class with_tests:
    """`factory` (original tree -> check) whose checks can also run tests (see the module
    docstring); `close()` closes `factory` where it has a `close`."""

    def __init__(self, factory: Callable[[Path], Check], ctx, backend) -> None:
        self.factory, self.ctx, self.backend = factory, ctx, backend

    def __call__(self, original: Path) -> TestedCheck:
        return TestedCheck(self.factory(original), original, self.ctx, self.backend)

    def close(self) -> None:
        getattr(self.factory, "close", lambda: None)()

"""The build check, one for the strategies (while they delete) and for verification: does an
edited tree still import its package and collect its baseline tests, in the sandbox?

In: the repository's environment, the baseline's collected test ids, the edited tree, a
`SuiteRunner`, and what the edit removed (files, names). Out: None, or `(rule, reason)` with a
rule code of `featdel.core.records.RULES` ("build.import", "build.collect"). A test module whose
collection fails only because it imports a deleted name is allowed (featdel.code.gone) and added
to `allowed_out`; its tests become fail-to-pass candidates. The sandbox itself breaking is a
`SandboxError`, never a reason.
"""

from __future__ import annotations

import json
from pathlib import Path

from featdel.code.gone import allowed
from featdel.code.spans import is_doctest
from featdel.core.errors import SandboxError
from featdel.env.testrun import RunOptions, SuiteRun, SuiteRunner

# Prints one JSON line whatever happens; anything else means the interpreter or sandbox broke.
_IMPORT = (
    "import importlib, json, sys\n"
    "try:\n    [importlib.import_module(m) for m in sys.argv[1:]]\n    err = None\n"
    "except BaseException as exc:\n    err = f'{type(exc).__name__}: {exc}'.splitlines()[0][:200]\n"
    "print('FEATDEL-IMPORT ' + json.dumps(err))"
)


def gone_doctests(tests, names: set[str]) -> set[str]:
    """The doctests among `tests` that a removed definition takes with it (`pkg.mod.Class.name`
    goes with `name`): pytest no longer collects them, and naming one on its command line would
    stop the whole run ("not found")."""
    return {t for t in tests if is_doctest(t) and t.partition("::")[2].rpartition(".")[2] in names}


def build_check(env, collected: set[str], tree: Path, runner: SuiteRunner, deleted_files: set[str],
                deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None) -> tuple[str, str] | None:
    return check_and_run(env, collected, tree, runner, deleted_files, deleted_names, allowed_out)[0]


def check_and_run(env, collected: set[str], tree: Path, runner: SuiteRunner, deleted_files: set[str],
                  deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None,
                  run: RunOptions | None = None) -> tuple[tuple[str, str] | None, SuiteRun | None]:
    """`build_check`, whose collecting run is `run` when given (`run.run_only`: the tests it also
    runs; its timeout covers collection too): (None or the failure, that run; None when the import
    check failed). A run that hangs or crashes after collection is no build failure: the caller
    judges it as a test run."""
    modules = [d.removeprefix("src/").removesuffix(".py").replace("/", ".") for d in env.recipe.package_dirs]
    result = runner.run([str(env.venv / "bin" / "python"), "-c", _IMPORT, *modules], tree=tree,
                        env=env.environ(), timeout_s=120)
    if result.timed_out:
        return ("build.import", "importing the package did not finish within 120s"), None
    marker = [ln for ln in result.stdout.splitlines() if ln.startswith("FEATDEL-IMPORT ")]
    if not marker:
        last = ((result.stderr or result.stdout).strip().splitlines() or ["no output"])[-1]  # forked: one stream
        raise SandboxError(f"the import check did not run (exit {result.exit_code}): {last[:200]}")
    error = json.loads(marker[-1].removeprefix("FEATDEL-IMPORT "))
    if error:
        return ("build.import", f"the package no longer imports: {error}"), None
    options = run or RunOptions(collect_only=True, timeout_s=300)
    suite = runner.run_suite(options, tree=tree)
    # With tests to run, a run that hangs or crashes after the plugin's `collected` record came
    # is the tests' doing; a collect-only run has nothing else to do
    collected_all = run is not None and bool(suite.found or suite.collect_errors)
    if suite.timed_out and not collected_all:
        return ("build.collect", f"collection did not finish within {options.timeout_s:.0f}s"), suite
    if suite.broken and not collected_all:
        # The original tree collects in this environment, so a crash here is the edit's doing
        # (a name used at import that is gone): a reason, never a dead batch.
        return ("build.collect", f"collection crashed: {suite.broken}"), suite
    messages = {e: suite.collect_messages.get(e, "") for e in suite.collect_errors}
    ok, why = allowed(messages, set(deleted_names))
    if why:
        return ("build.collect", f"collection fails: {why}"), suite
    if allowed_out is not None:
        allowed_out |= ok
    expected = {t for t in collected if t.split("::")[0] not in deleted_files | ok}
    missing = expected - set(suite.found) - gone_doctests(expected, deleted_names)
    if missing:
        return ("build.collect", f"{len(missing)} baseline tests are no longer collected, e.g. {sorted(missing)[0]}"), suite
    return None, suite

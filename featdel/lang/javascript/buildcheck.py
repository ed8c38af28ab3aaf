"""The build check for JavaScript and TypeScript: does an edited tree still load, type-check and
collect its baseline tests, in the sandbox?

In: a `NodeEnv`, the baseline's collected test ids and load errors, the edited tree, a
`NodeRunner` of the env, and what the edit removed (files, names). Out: None, or `(rule,
reason)` with the rule codes Python's check uses ("build.import", "build.collect"), so verdicts
read the same in both languages. Three steps, each in the sandbox:
  1. node loads the package's entry (package.json `exports`, `main`, else `index.js`) through
     `import()`, which takes CommonJS and ES modules alike; an entry node cannot load by itself
     (TypeScript, or built output the tree does not hold) is left to the next steps, and so is
     an entry the original tree fails to load too (defu's lib/*.cjs requires ../dist, unbuilt in
     the checkout): the original's result is computed once per env and entry, as tsc's is;
  2. TypeScript: the repository's own type check, `tsc --noEmit` from its node_modules, when it
     has typescript and a tsconfig.json, and only when the original tree passes it (a package
     whose types were broken upstream is not the edit's fault); an error in a test file that
     names a deleted name is the missing feature, not a broken build;
  3. the suite runs whole (a JS runner loads a file by running it, so a run is its collect): no
     run that breaks, no new load error, and every baseline test still has an outcome.
A test file that fails to load only because it imports a deleted name (ES `does not provide an
export named 'x'`, or a load-time `x is not a function` / `is not defined`) is allowed, as
featdel.code.gone allows Python's, and added to `allowed_out`: its tests become F2P candidates.
The sandbox itself breaking is a `SandboxError`, never a reason.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from featdel.core.errors import SandboxError

_LOAD = (
    "const p = require('path'), u = require('url');"
    "import(u.pathToFileURL(p.resolve(process.argv[1])).href).then("
    "() => console.log('FEATDEL-IMPORT null'),"
    "(e) => console.log('FEATDEL-IMPORT ' + JSON.stringify(String((e && e.stack) || e).split('\\n')[0].slice(0, 200))));"
)
_LOADABLE = (".js", ".mjs", ".cjs")
_typechecks: dict[str, bool] = {}  # env root -> does its original tree pass `tsc --noEmit`?
_original_loads: dict[tuple[str, str], bool] = {}  # (env root, entry) -> does the original load it?
_lock = threading.Lock()


def entry(tree: Path) -> str | None:
    """The package's entry file, relative to `tree`, when the tree holds it and node can load it alone."""
    try:
        pkg = json.loads((tree / "package.json").read_text())
    except (OSError, ValueError):
        return None
    found = _export_target(pkg.get("exports")) or pkg.get("main") or "index.js"
    if not isinstance(found, str):
        return None
    rel = found.removeprefix("./")
    path = tree / rel
    if path.is_dir():
        path, rel = path / "index.js", f"{rel.rstrip('/')}/index.js"
    elif not path.suffix and (tree / f"{rel}.js").is_file():
        path, rel = tree / f"{rel}.js", f"{rel}.js"
    return rel if path.is_file() and path.suffix in _LOADABLE else None


def _export_target(exports) -> str | None:
    if isinstance(exports, str):
        return exports
    if isinstance(exports, dict):
        main = exports.get(".", exports if not any(k.startswith(".") for k in exports) else None)
        if isinstance(main, str):
            return main
        if isinstance(main, dict):
            for condition in ("require", "node", "import", "default"):
                got = _export_target(main.get(condition))
                if got:
                    return got
    return None


def removed_names(original: Path, edits: dict[str, str | None]) -> set[str]:
    """Names the edits remove: a definition's last qualname part no longer in its file, and the
    stem of a removed file (what a test's import of it names)."""
    from featdel.lang.javascript import syntax

    out: set[str] = set()
    for rel, text in edits.items():
        if text is None:
            out.add(Path(rel).name.split(".", 1)[0])
            continue
        if not rel.endswith(syntax.SUFFIXES) or not (original / rel).is_file():
            continue
        before = {s.qualname for s in syntax.symbols((original / rel).read_bytes(), rel)}
        after = {s.qualname for s in syntax.symbols(text.encode(), rel)}
        out |= {q.rpartition(".")[2] for q in before - after}
    return out


def allowed(messages: dict[str, str], names: set[str]) -> tuple[set[str], str | None]:
    """(test files whose load error names only a deleted name, the first other error or None)."""
    ok: set[str] = set()
    for rel, message in sorted(messages.items()):
        first = next((ln.strip() for ln in message.splitlines() if ln.strip()), "no message")
        named = re.findall(r"export named '([\w$]+)'|\b([\w$]+)(?:\)\(\.\.\.\))? is not (?:a function|defined|a constructor)"
                           r"|Cannot find module '[^']*?([\w$-]+)(?:\.[cm]?[jt]sx?)?'", message)
        hits = {n for group in named for n in group if n}
        if hits and hits & names and rel != "<session>":
            ok.add(rel)
        else:
            return ok, f"{rel}: {first[:200]}"
    return ok, None


def build_check(env, collected: set[str], tree: Path, runner, deleted_files: set[str],
                deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None,
                baseline_errors: set[str] = frozenset()) -> tuple[str, str] | None:
    from featdel.env.testrun import RunOptions
    from featdel.lang.javascript import syntax

    found = entry(tree)
    if found is not None and found not in deleted_files:
        failed = _loads(env, tree, runner, found)
        if failed and original_loads(env, runner, found):
            return "build.import", f"the package no longer loads: {failed}"
    if _typed(env, tree) and original_typechecks(env, runner):
        ok, why, errors = _tsc(env, runner, tree)
        # a test file's error that names a deleted name is the missing feature, as a load error is
        own = {f for f, message in errors if syntax.is_test_path(f) and set(re.findall(r"'([\w$]+)'", message)) & set(deleted_names)}
        other = [(f, m) for f, m in errors if f not in own]
        if not ok and (other or not errors):
            return "build.import", f"the type check fails: {f'{other[0][0]}: {other[0][1]}' if other else why}"
    run = runner.run_suite(RunOptions(timeout_s=300), tree=tree)
    if run.timed_out:
        return "build.collect", "the suite did not finish within 300s"
    if run.broken:
        return "build.collect", f"the suite no longer runs: {run.broken}"
    new = {e: run.collect_messages.get(e, "") for e in run.collect_errors
           if e not in baseline_errors and e not in deleted_files}
    ok, why = allowed(new, set(deleted_names))
    if why:
        return "build.collect", f"a test file no longer loads: {why}"
    if allowed_out is not None:
        allowed_out |= ok
    expected = {t for t in collected if t.split("::")[0] not in deleted_files | ok}
    ran = set(run.collected)
    missing = {t for t in expected - ran if not lost_with_parent(t, run, ran)}
    if missing:
        return "build.collect", f"{len(missing)} baseline tests no longer run, e.g. {sorted(missing)[0]}"
    return None


def lost_with_parent(test: str, run, ran: set[str] | None = None) -> bool:
    """Is `test` a subtest that never registered because its parent test failed before reaching
    it? Subtests are made while the parent's callback runs (tape's `t.test`, node:test's), so a
    parent that throws midway loses the ones after; the grader counts a missing test as failed,
    so such a test is one more F2P candidate, not a suite that no longer loads. The nearest
    ancestor that ran decides: it must have failed. `ran`: `run.collected` as a set, when the
    caller asks for many tests."""
    parts = test.split("::")
    ran = set(run.collected) if ran is None else ran
    for k in range(len(parts) - 1, 1, -1):
        parent = "::".join(parts[:k])
        if parent in ran:
            return run.outcomes.get(parent) in ("failed", "error")
    return False


def _loads(env, tree: Path | None, runner, rel: str) -> str | None:
    result = runner.run([env.node, "-e", _LOAD, rel], tree=tree, env=env.environ(), timeout_s=120)
    if result.timed_out:
        return "loading the entry did not finish within 120s"
    marker = [ln for ln in result.stdout.splitlines() if ln.startswith("FEATDEL-IMPORT ")]
    if not marker:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        if result.exit_code != 0:  # the entry ended the process while loading, or node could not start
            return f"node exited {result.exit_code}: {last[:200]}"
        raise SandboxError(f"the load check did not run (exit {result.exit_code}): {last[:200]}")
    return json.loads(marker[-1].removeprefix("FEATDEL-IMPORT "))


def original_loads(env, runner, rel: str) -> bool:
    """Does node load `rel` from the env's own checkout (the original tree)? Once per env, entry
    and process; an entry the original lacks counts as not loading."""
    key = (str(env.root), rel)
    with _lock:
        if key in _original_loads:
            return _original_loads[key]
    ok = (env.src / rel).is_file() and _loads(env, None, runner, rel) is None
    with _lock:
        _original_loads[key] = ok
    return ok


def _typed(env, tree: Path) -> bool:
    return (tree / "tsconfig.json").is_file() and (env.node_modules / "typescript" / "bin" / "tsc").is_file()


def _tsc(env, runner, tree: Path | None) -> tuple[bool, str, list[tuple[str, str]]]:
    """(passes, the first error line, (file, message) of every error tsc names a file for)."""
    tsc = str(env.node_modules / "typescript" / "bin" / "tsc")
    result = runner.run([env.node, tsc, "--noEmit", "--incremental", "false", "-p", "tsconfig.json"],
                        tree=tree, env=env.environ(), timeout_s=300)
    if result.timed_out:
        return False, "tsc did not finish within 300s", []
    lines = [ln.strip() for ln in (result.stdout + result.stderr).splitlines() if ln.strip()]
    errors = [(m.group(1), m.group(2)) for ln in lines if (m := re.match(r"^(.+?)\(\d+,\d+\): error (TS\d+: .*)$", ln))]
    first = next((ln for ln in lines if "error TS" in ln), None) or (lines or ["no output"])[-1]
    return result.exit_code == 0, first[:240], errors


def original_typechecks(env, runner) -> bool:
    """Does the env's own checkout (the original tree) pass the type check? Once per env and process."""
    key = str(env.root)
    with _lock:
        if key in _typechecks:
            return _typechecks[key]
    ok = _typed(env, env.src) and _tsc(env, runner, None)[0]
    with _lock:
        _typechecks[key] = ok
    return ok

"""Stage 1, mine: pin each source, build its environment, record a baseline and a coverage map.

In: source specs (with manifest overrides) and a run directory. Out, per repo:
`RUN_DIR/repos/<name>/baseline.json` (every test's outcome in each baseline run, duration,
flakiness), `coverage.json` (which tests execute which symbol) and `snapshot.tar.gz` (the
original tree, no VCS data), plus one `RepoRecord` line in
`RUN_DIR/repos.jsonl` (its language, detected from the tree by featdel.lang; its recipe carries
the env's lock; `left_out` lists the test modules that could not be collected, each with its
error). Every step past the checkout goes through the language: its recipe, environment,
runner (three baselines, flaky marked) and coverage map, and the same thresholds judge it. A repo already recorded as mined or rejected is not redone; a broken one
(source, install or sandbox trouble) is retried. One bad repo never stops the batch: it becomes
a record with a status and a one-line reason.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from featdel.core.errors import FeatdelError
from featdel.core.records import Baseline, BaselineTest, Outcome, RepoRecord, RepoStatus
from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry


@dataclass(frozen=True, kw_only=True, slots=True)
class Thresholds:
    """What makes a repo usable. Every miss becomes a `rejected` record naming the threshold."""

    min_passing: int = 10
    max_failure_rate: float = 0.2  # failed or erroring tests / collected tests
    max_suite_seconds: float = 600.0
    min_coverage: float = 30.0  # percent of the package's statements run by the suite
    baseline_runs: int = 3

    @classmethod
    def from_overrides(cls, items: list[str] | None) -> Thresholds:
        """The defaults with KEY=VALUE overrides; an unknown key or a non-number is a one-line error."""
        from dataclasses import fields

        known = {f.name: f.type for f in fields(cls)}
        result = cls()
        for item in items or []:
            key, _, value = item.partition("=")
            if key not in known or not value:
                raise FeatdelError(f"--threshold {item!r}: use KEY=VALUE with KEY one of {', '.join(known)}")
            try:
                number = int(value) if known[key] in ("int", int) else float(value)
            except ValueError:
                raise FeatdelError(f"--threshold {item!r}: {value!r} is not a number") from None
            result = replace(result, **{key: number})
        return result


def mine(
    entries: list[CorpusEntry],
    run_dir: Path,
    *,
    backend,
    thresholds: Thresholds = Thresholds(),
    jobs: int = 1,
    on_step: Callable[[str, str], None] = lambda source, step: None,
    executor=None,
) -> list[RepoRecord]:
    """Mine every entry not yet done on `executor` (featdel.pipeline.executor; default: `jobs` threads
    here); return the latest record of every entry. Only this driver writes the run directory:
    a remote worker's files come back with its record and are written here."""
    from featdel.pipeline.shipping import write_files

    run_dir = run_dir.resolve()
    rd = RunDir(run_dir)
    shown = on_step

    def on_step(source: str, step: str) -> None:  # shown, and recorded in progress.jsonl
        rd.add_progress("mine", source, step)
        shown(source, step)

    done = rd.latest_repos()
    rd.stage_options("mined", {"thresholds": asdict(thresholds), "sandbox": getattr(backend, "name", "")},
                     started=bool(done))
    todo = [e for e in entries if e.source not in done or done[e.source].status == RepoStatus.BROKEN]
    for e in entries:
        if e not in todo:
            on_step(e.source, "resumed")
    if executor is None:
        results = mine_here(todo, run_dir, backend=backend, thresholds=thresholds, on_step=on_step, jobs=jobs)
    else:
        results = executor.mine(todo, run_dir, backend=backend, thresholds=thresholds, on_step=on_step)
    for mined in results:
        write_files(run_dir, mined.files)
        rd.add_repo(mined.record)
        done[mined.record.source] = mined.record
        on_step(mined.record.source, "done")
    return [done[e.source] for e in entries if e.source in done]


def mine_here(entries: list[CorpusEntry], run_dir: Path, *, backend, thresholds: Thresholds, on_step, jobs: int = 1):
    """Mining results of `entries` from `jobs` threads in this process, as they finish: the
    default of `mine`, and the local executor's work."""
    from featdel.core.parallel import thread_map
    from featdel.pipeline.shipping import Mined

    return thread_map(lambda e: Mined(record=mine_one(e, run_dir, backend=backend, thresholds=thresholds,
                                                      on_step=on_step)), entries, jobs)


def mine_one(entry: CorpusEntry, run_dir: Path, *, backend, thresholds: Thresholds, on_step) -> RepoRecord:
    """Pin, install and baseline one source. When the suite crashes before pytest can report
    (an old conftest against a new pytest), try the next pytest in `PYTEST_FALLBACKS`."""
    from featdel.env import sources
    from featdel.env.recipe import PYTEST_FALLBACKS

    record = RepoRecord(source=entry.source, name=entry.source)
    try:
        on_step(entry.source, "pin")
        pinned = sources.resolve(entry.source)
        record = replace(record, name=pinned.name, commit=pinned.commit)
        from featdel.code.trees import write_snapshot

        snapshot = RunDir(run_dir).snapshot(pinned.name)
        if not snapshot.exists():
            write_snapshot(pinned.repo, pinned.commit, snapshot)
        first = None
        for pytest_req in PYTEST_FALLBACKS:
            attempt = _attempt(entry, pinned, record, run_dir, backend, thresholds, on_step, pytest_req)
            first = first or attempt
            if not (attempt.status == RepoStatus.BROKEN and attempt.reason.startswith("pytest wrote no report")):
                return _with_extras(attempt, entry, pinned, record, run_dir, backend, thresholds, on_step,
                                    pytest_req)
        return first
    except FeatdelError as exc:
        return replace(record, status=RepoStatus.BROKEN, reason=str(exc))
    except Exception as exc:  # a surprise on one repo is recorded (and retried on resume), never fatal
        import traceback

        where = RunDir(run_dir).repo_dir(record.name.replace("/", "_"))
        where.mkdir(parents=True, exist_ok=True)
        (where / "traceback.txt").write_text(traceback.format_exc())
        return replace(record, status=RepoStatus.BROKEN,
                       reason=f"{type(exc).__name__}: {str(exc)[:200]} (traceback in {where / 'traceback.txt'})")


def _with_extras(attempt: RepoRecord, entry: CorpusEntry, pinned, record: RepoRecord, run_dir: Path, backend,
                 thresholds: Thresholds, on_step, pytest_req: str) -> RepoRecord:
    """A test module that could not import a module may need an optional feature: when the
    repo declares extras beyond its test extras, retry with all of them and keep the better."""
    from featdel.env.recipe import declared_extras

    missing = [m for m in attempt.left_out if "ModuleNotFoundError" in m or "No module named" in m]
    if not missing or attempt.env_dir is None or attempt.language != "python":
        return attempt
    # the editable install's target: ".[test,docs]" or "."
    target = next((argv[-1] for argv in (attempt.recipe.install if attempt.recipe else []) if "-e" in argv), "")
    have = set(target.partition("[")[2].rstrip("]").split(","))
    more = sorted(declared_extras(Path(attempt.env_dir) / "src") - have)
    if not more:
        return replace(attempt, reason=_also(attempt.reason, "the repo declares no other extras"))
    try:
        retry = _attempt(entry, pinned, record, run_dir, backend, thresholds, on_step, pytest_req, all_extras=True)
    except FeatdelError as exc:
        return replace(attempt, reason=_also(attempt.reason, f"installing its extras failed: {str(exc)[:160]}"))
    if (retry.status == RepoStatus.MINED) > (attempt.status == RepoStatus.MINED) or retry.passed > attempt.passed:
        return retry
    return replace(attempt, reason=_also(attempt.reason, f"its extras ({', '.join(more)}) did not help"))


def _also(reason: str, more: str) -> str:
    return f"{reason}; {more}" if reason else ""


def _attempt(entry: CorpusEntry, pinned, record: RepoRecord, run_dir: Path, backend, thresholds: Thresholds,
             on_step, pytest_req: str, *, all_extras: bool = False) -> RepoRecord:
    from featdel.env import envs, recipe, sources
    from featdel.lang import detect_language

    with tempfile.TemporaryDirectory(prefix="featdel-tree-") as tmp:
        tree = Path(tmp) / "src"
        sources.checkout(pinned, tree)
        lang = detect_language(tree)
        if lang.name != "python":
            return _attempt_other(entry, pinned, replace(record, language=lang.dialect(tree)), run_dir, backend,
                                  thresholds, on_step, lang, tree)
        built = recipe.detect(tree, entry.overrides, pytest_req=pytest_req, all_extras=all_extras)
        if not built.package_dirs:
            return replace(record, status=RepoStatus.REJECTED, reason="no importable package found in the tree")
        step = "install" if pytest_req == "pytest" else f"install ({pytest_req})"
        on_step(entry.source, f"{step} (all extras)" if all_extras else step)
        env = envs.build(pinned, built, tree_ready=tree)
    # A module left out at baseline is an `--ignore` in the env's test command, added below:
    # start again from the command the recipe asked for, so every mining run sees every module.
    env = replace(env, recipe=replace(env.recipe, test_cmd=built.test_cmd))
    record = replace(record, recipe=env.recipe, env_dir=str(env.root))
    if getattr(backend, "name", "") == "docker":
        on_step(entry.source, "image")
        record = replace(record, image_name=_repo_image(env))
    timeout = entry.overrides.timeout_s or thresholds.max_suite_seconds
    return _baseline(record, env, RunDir(run_dir), backend, thresholds, timeout,
                     lambda step: on_step(entry.source, step))


def _attempt_other(entry: CorpusEntry, pinned, record: RepoRecord, run_dir: Path, backend, thresholds: Thresholds,
                   on_step, lang, tree: Path) -> RepoRecord:
    """`_attempt` for a language other than Python (featdel.lang): its recipe, its environment,
    the same baselines. Its runners go on past a file that fails to load, so nothing is left out
    of the test command; the docker backend runs it in the language's per-repo image."""
    built = lang.recipe(tree)
    if not built.package_dirs:
        return replace(record, status=RepoStatus.REJECTED, reason="no library source folder found in the tree")
    on_step(entry.source, "install")
    env = lang.build_env(pinned, built, tree_ready=tree)
    record = replace(record, recipe=env.recipe, env_dir=str(env.root))
    if getattr(backend, "name", "") == "docker":
        on_step(entry.source, "image")
        record = replace(record, image_name=lang.repo_image(env))
    timeout = entry.overrides.timeout_s or thresholds.max_suite_seconds
    return _baseline(record, env, RunDir(run_dir), backend, thresholds, timeout,
                     lambda step: on_step(entry.source, step))


def _repo_image(env) -> str:
    """The per-repo docker image: the base plus the interpreter and this env's venv."""
    from featdel.lang import language

    return language("python").repo_image(env)


def _baseline(record: RepoRecord, env, rd: RunDir, backend, thresholds: Thresholds, timeout: float,
              on_step=lambda step: None) -> RepoRecord:
    import shutil

    from featdel.env.testrun import RunOptions
    from featdel.lang import language

    lang = language(record.language)
    out = rd.repo_dir(record.name)
    out.mkdir(parents=True, exist_ok=True)
    data_file = out / lang.coverage_name
    runs = []
    # One sandbox for the repository's runs, reset between them (featdel.env.testrun.warm_runner).
    with lang.runner(env, backend, image=record.image_name) as runner:
        for i in range(thresholds.baseline_runs):
            on_step(f"baseline {i + 1}/{thresholds.baseline_runs}" + (" (with coverage)" if i == 0 else ""))
            # The first run measures coverage (per-test contexts); all runs vote on outcomes. A
            # module that cannot be collected does not stop the rest of the suite: the first run
            # records it, and the env's test command leaves it out from then on (`--ignore`), so
            # verification, grading and exports run the same suite.
            options = RunOptions(timeout_s=timeout * (2 if i == 0 else 1),
                                 coverage_to=data_file if i == 0 else None,
                                 extra_args=list(lang.continue_args))
            run = runner.run_suite(options)
            if run.timed_out:
                why = f"baseline run {i + 1} over its time limit ({options.timeout_s:.0f}s)"
                return replace(record, status=RepoStatus.REJECTED, reason=why)
            if run.broken:
                return replace(record, status=RepoStatus.BROKEN, reason=run.broken)
            if i == 0:
                left_out = [f"{e}: {first_error(run.collect_messages.get(e, ''))}" for e in run.collect_errors]
                record = replace(record, left_out=left_out)
                if not run.collected:
                    why = _nothing_collected(env.src, left_out)
                    return replace(record, status=RepoStatus.REJECTED, reason=why)
                if lang.name == "python":
                    env = _leave_out(env, record, run.collect_errors)
                    runner.retarget(env)
                    record = replace(record, recipe=env.recipe)
            runs.append(run)
    tests = sorted(set().union(*(r.outcomes for r in runs)))
    per_test = {t: [Outcome(r.outcomes.get(t, Outcome.MISSING)) for r in runs] for t in tests}
    flaky = {t for t, o in per_test.items() if len(set(o)) > 1}
    stable = {t: o[0] for t, o in per_test.items() if t not in flaky}
    passed = {t for t, o in stable.items() if o == "passed"}
    failed = {t for t, o in stable.items() if o in ("failed", "error")}
    seconds = min(r.seconds for r in runs[1:]) if len(runs) > 1 else runs[0].seconds
    Baseline(runs=len(runs), suite_seconds=[round(r.seconds, 3) for r in runs],
             tests={t: BaselineTest(outcomes=per_test[t], flaky=t in flaky,
                                    duration=round(runs[-1].durations.get(t, 0.0), 4)) for t in tests},
             collect_errors=runs[0].collect_errors).save(rd.baseline(record.name))
    on_step("coverage map")
    cmap = lang.coverage_map(env.src, env.recipe.package_dirs, data_file, passed)
    cmap.save(rd.coverage(record.name))
    if data_file.is_dir():
        shutil.rmtree(data_file, ignore_errors=True)
    else:
        data_file.unlink(missing_ok=True)
    record = replace(
        record, collected=len(runs[0].collected), passed=len(passed), failed=len(failed),
        skipped=len(stable) - len(passed) - len(failed), flaky=len(flaky),
        suite_seconds=round(seconds, 2), coverage=cmap.line_rate,
    )
    return _judge(record, thresholds)


def first_error(message: str) -> str:
    """The telling line of a collection error text: pytest's last `E ` line; node's error line
    (the line after the `throw` caret, else the first naming an Error), not its closing
    `Node.js v20...`."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    if errors:
        return errors[-1][:200]
    caret = next((i for i, ln in enumerate(lines) if set(ln) == {"^"}), None)
    named = [ln for ln in lines if re.search(r"Error\b", ln) and not ln.startswith("at ")]
    if caret is not None and caret + 1 < len(lines):
        return lines[caret + 1][:200]
    if named:
        return named[0][:200]
    rest = [ln for ln in lines if not re.fullmatch(r"Node\.js v[\d.]+", ln)]
    return ((rest or lines or ["no message"])[-1])[:200]


def _nothing_collected(tree: Path, left_out: list[str]) -> str:
    from featdel.code.spans import is_test_path

    if left_out:
        return f"no tests collected: {len(left_out)} test modules could not be collected, e.g. {left_out[0]}"
    from featdel.lang.javascript import syntax

    has_tests = any(is_test_path(p.relative_to(tree).as_posix()) for p in tree.rglob("*.py")) or bool(
        syntax.test_files(tree))
    return "no tests collected" + ("" if has_tests else
                                   ": the tree has no test files (an sdist or npm tarball without its tests?)")


def _leave_out(env, record: RepoRecord, errors: list[str]):
    """The env with every module that failed collection `--ignore`d in its test command, saved
    in the env's marker (what verification and grading load)."""
    from featdel.env import envs

    ignore = [f"--ignore={e}" for e in errors if e not in ("", ".", "<session>") and (env.src / e).exists()]
    refined = replace(env, recipe=replace(env.recipe, test_cmd=[*env.recipe.test_cmd, *ignore]))
    return envs.save(refined, record.name, record.commit)


def _judge(record: RepoRecord, t: Thresholds) -> RepoRecord:
    rate = record.failed / max(record.collected, 1)
    if record.passed < t.min_passing:
        why = f"only {record.passed} passing tests (minimum {t.min_passing})"
        if record.left_out:
            why += f"; {len(record.left_out)} test modules could not be collected, e.g. {record.left_out[0]}"
        elif record.failed:
            why += f"; {record.failed} failed at baseline"
    elif rate > t.max_failure_rate:
        why = f"baseline failure rate {rate:.0%} over {t.max_failure_rate:.0%}"
    elif record.suite_seconds > t.max_suite_seconds:
        why = f"suite takes {record.suite_seconds:.0f}s (maximum {t.max_suite_seconds:.0f}s)"
    elif record.coverage < t.min_coverage:
        dirs = ", ".join(record.recipe.package_dirs) if record.recipe else "?"
        why = f"line coverage {record.coverage:.1f}% of {dirs} under {t.min_coverage:.0f}%"
    else:
        return replace(record, status=RepoStatus.MINED, reason="")
    return replace(record, status=RepoStatus.REJECTED, reason=why)

"""The rules of verification, one small function each, in the order they run (`GATES`).

In: a `Work` (the deletion, its repository context, the runner, the options) that each gate reads
and adds to. Out: nothing, or `Rejected(rule, reason)` with a rule code of
`featdel.core.records.RULES`; the sandbox breaking is `Broke`. docs/verification.md states each
rule; featdel.pipeline.verify runs the list and turns the outcome into a `Verdict`.
"""

from __future__ import annotations

import random
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from featdel.code import exposure, leaks, starts, trees
from featdel.code.spans import is_doctest
from featdel.core.records import Deletion, Outcome
from featdel.deletion import quality, statement
from featdel.env.buildcheck import gone_doctests
from featdel.env.testrun import RunOptions, SuiteRun, SuiteRunner
from featdel.grading import canaries
from featdel.grading.grade import GradeStatus, GradeTask, grade
from featdel.pipeline.context import Broke, RepoContext, removed_names


def _continue(ctx: RepoContext, opts) -> list[str]:
    """The gates' runner arguments: past a module that fails to load, so an allowed module that
    fails collection does not stop the other selected tests (the language's flag:
    featdel.lang.base.Language.continue_args), and (unless the options ask for tracebacks) a
    failure in one line."""
    quiet = () if opts.tracebacks else ctx.lang.quiet_args
    return [*ctx.lang.continue_args, *quiet]


class Rejected(Exception):
    def __init__(self, rule: str, reason: str):
        super().__init__(reason)
        self.rule = rule
        self.stage = rule.partition(".")[0]


@dataclass
class Work:
    """One deletion on its way through the gates; each gate fills in what it found."""

    ctx: RepoContext
    deletion: Deletion
    runner: SuiteRunner
    opts: object  # featdel.pipeline.verify.VerifyOptions
    tmp: Path
    spent: list[float] = field(default_factory=list)  # sandbox seconds per test run
    deletion_patch: str = ""
    patch: str = ""
    original: Path | None = None
    names: set[str] = field(default_factory=set)  # names the deletion removes
    unimportable: set[str] = field(default_factory=set)  # test modules allowed to fail collection
    tied: list[str] = field(default_factory=list)  # tests the coverage map ties to the deletion
    sample: list[str] = field(default_factory=list)  # a seeded sample of the others
    gone: set[str] = field(default_factory=set)  # doctests the deletion takes with it
    failing: list[str] = field(default_factory=list)  # F2P (candidates until `stays_failing`)
    stubbed: dict[str, str] = field(default_factory=dict)  # tests a stub body passes -> its label
    start_sha256: str = ""
    similarity: float = 0.0
    statement: str = ""
    needles: list[str] = field(default_factory=list)  # the deleted code's distinctive lines
    p2p: list[str] = field(default_factory=list)
    first: tuple[list[str], SuiteRun] | None = None  # (selection, run): the build check's run took it

    @property
    def deleted_files(self) -> set[str]:
        return {p for p, text in self.deletion.files.items() if text is None}

    def fresh(self, name: str, *, bytecode: bool = True) -> Path:
        """A new start state (snapshot + deletion patch) under `tmp`: built once per candidate
        (extract, `git apply`, scrub, commit), then copied whole for every run, which may write
        to its copy. A copy costs a fifth of a build. With `bytecode`, the original's compiled
        files of the files the deletion left alone come with it (featdel.env.bytecode): a run to
        test it, not the start state to audit or hash."""
        pristine = self.tmp / "pristine"
        if not pristine.exists():
            starts.start_state(self.ctx.snapshot, self.deletion_patch, pristine)  # the grader's runs copy it too
        if not bytecode or not self.opts.bytecode:
            return trees.copy_tree(pristine, self.tmp / name)
        compiled = self.tmp / "pristine-compiled"
        if not compiled.exists():
            self.with_bytecode(trees.copy_tree(pristine, self.tmp / "compiling"), set(self.deletion.files))
            (self.tmp / "compiling").rename(compiled)
        return trees.copy_tree(compiled, self.tmp / name)

    def variant(self, name: str, files: dict[str, str | None]) -> Path:
        """The original with `files` written over it (a stub variant's tree), made from a copy of
        the start state (`trees.variant_state`): the files the deletion changed and `files` does
        not name go back to the original's, with the original's bytecode."""
        from featdel.env.bytecode import overlay, source_of

        tree = self.fresh(name)
        restored = set(trees.variant_state(tree, self.original, set(self.deletion.files), files))
        if restored and self.opts.bytecode:
            overlay(tree, {rel: pyc for rel, pyc in self.bytecode().items() if source_of(rel) in restored}, set())
        return tree

    def bytecode(self) -> dict[str, bytes]:
        """The original's compiled files (featdel.env.bytecode); none when the options say so."""
        return self.ctx.bytecode(self.runner, self.timeout()) if self.opts.bytecode else {}

    def with_bytecode(self, tree: Path, changed: set[str]) -> Path:
        """`tree` with the original's bytecode beside each of its files not in `changed`."""
        from featdel.env.bytecode import overlay

        overlay(tree, self.bytecode(), changed)
        return tree

    def timeout(self) -> float:
        return self.opts.run_timeout(self.ctx)

    def run(self, tree: Path, tests: list[str]) -> SuiteRun:
        """A run of `tests` in the deleted tree `tree`. The tests of a module the deletion leaves
        unimportable are not asked for: pytest given a node id it cannot collect runs nothing at
        all (exit 4), which made every test of the run look failing (idna's `compat.py`: 29 tests
        that pass on the start state became F2P). Left out, they count as missing: failing."""
        tests = [t for t in tests if t.split("::")[0] not in self.unimportable]
        if not tests:
            return SuiteRun(outcomes={}, durations={}, collected=[], collect_errors=[], exit_code=0, seconds=0.0)
        run = self.runner.run_suite(RunOptions(tests=tests, timeout_s=self.timeout(),
                                               extra_args=_continue(self.ctx, self.opts)), tree=tree)
        self.spent.append(run.seconds)
        return self.judged(run)

    def judged(self, run: SuiteRun) -> SuiteRun:
        """`run`, unless its tests hung (rejected) or it wrote no full report (broken)."""
        if run.timed_out:  # the code under test hangs (a deletion can make a loop endless): not the sandbox
            raise Rejected("tests.timeout", f"the tests did not finish within {self.timeout():.0f}s")
        if run.broken:
            raise Broke(run.broken)
        return run

    def grade_task(self, f2p: list[str], p2p: list[str], run_p2p: tuple[str, ...] | None = None) -> GradeTask:
        ctx = self.ctx
        return GradeTask(instance_id="", env=ctx.env, snapshot=ctx.snapshot, deletion_patch=self.deletion_patch,
                         gold_patch=self.patch, fail_to_pass=f2p, pass_to_pass=p2p, image=ctx.image,
                         timeout_s=self.timeout(), run_p2p=run_p2p, language=ctx.record.language)


def select_tests(ctx: RepoContext, deletion: Deletion, opts, unimportable: set[str] = frozenset()
                 ) -> tuple[list[str], list[str]]:
    """(tests the coverage map ties to the deleted symbols, or that sit in a test module that
    imports a deleted name, and the others the F2P runs take): a seeded sample of the others
    when every changed line lies inside a function (`seen_by`, whose tests join the first
    list), else all of them, as with `full_suite`: a change at module or class level runs in
    every importer, which per-test coverage cannot tell."""
    deleted_files = {p for p, text in deletion.files.items() if text is None}
    refs = set(deletion.deleted_symbols)
    tied = {t for t in ctx.passing if t.split("::")[0] in unimportable}
    for s in ctx.cmap.symbols:
        if f"{s.path}::{s.qualname}" in refs or s.path in deleted_files:
            tied.update(s.tests)
    usable = [t for t in ctx.passing if t.split("::")[0] not in deleted_files]
    seen = None if opts.full_suite else seen_by(ctx, deletion)
    tied |= seen or set()
    # A test that reached a changed file's code in its setup may have set up a fixture of class
    # or module scope that the other tests of its file share without reaching that code
    # themselves (networkx's TestInternetASTopology builds its graph in `setup_class`): they all
    # can see the change
    in_setup = {t for s in ctx.cmap.symbols if s.path in deletion.files for t in s.in_setup}
    shared = {t.split("::")[0] for t in tied & in_setup}
    tied = sorted((tied | {t for t in usable if t.split("::")[0] in shared}) & set(usable))
    others = [t for t in usable if t not in set(tied)]
    if seen is None:
        return tied, others
    rng = random.Random(opts.seed ^ zlib.crc32(deletion.deletion_id.encode()))
    return tied, sorted(rng.sample(others, min(opts.p2p_sample, len(others))))


def seen_by(ctx: RepoContext, deletion: Deletion) -> set[str] | None:
    """The tests that can see the change, when every changed line of the original (blank and
    comment lines aside) and every insertion point lies inside a function or method, its header
    included: the tests the coverage map ties to the innermost such function of each line, and,
    for a function whose `def` goes, the tests that name it (`naming`). None when a change lies
    anywhere else (module or class level, which every importer runs), a file goes or comes, or
    a file is not Python: then the F2P runs take every test."""
    import difflib

    from featdel.code.spans import symbols

    original = ctx.original()
    tests_of = {(s.path, s.qualname): s.tests for s in ctx.cmap.symbols}
    out: set[str] = set()
    gone: set[str] = set()  # names whose `def` the change removes
    for path, text in deletion.files.items():
        source = original / path
        if text is None or not path.endswith(".py") or not source.is_file():
            return None
        old = source.read_bytes()
        funcs = [s for s in symbols(old, path) if s.kind != "class"]
        old_lines, new_lines = old.decode("utf-8", "replace").splitlines(), text.splitlines()

        def inner(first: int, last: int):
            around = [f for f in funcs if f.start_line <= first and last <= f.end_line]
            return max(around, key=lambda f: f.start_line) if around else None

        for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False).get_opcodes():
            if tag == "equal":
                continue
            changed = [n for n in range(i1 + 1, i2 + 1) if old_lines[n - 1].strip()[:1] not in ("", "#")]
            spans = [(n, n) for n in changed] or [(i1, i1 + 1)]  # none: an insertion between i1 and i1+1
            for first, last in spans:
                func = inner(first, last)
                if func is None:
                    return None
                out.update(tests_of.get((path, func.qualname), ()))
                if first == func.def_line:
                    gone.add(func.name)
    return out | naming(ctx, gone) if gone else out


def naming(ctx: RepoContext, names: set[str]) -> set[str]:
    """Baseline tests whose own function names one of `names` (a word of its source), and every
    test of a module that names one outside its test functions (a helper, a fixture)."""
    import re

    from featdel.code.spans import symbols

    word = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
    by_file: dict[str, list[str]] = {}
    for t in ctx.collected:
        by_file.setdefault(t.split("::")[0], []).append(t)
    out: set[str] = set()
    for rel, tests in by_file.items():
        path = ctx.original() / rel
        if not rel.endswith(".py") or not path.is_file():
            continue
        source = path.read_bytes()
        lines = source.decode("utf-8", "replace").splitlines()
        hits = {n for n, line in enumerate(lines, 1) if word.search(line)}
        if not hits:
            continue
        funcs = {s.qualname: s for s in symbols(source, rel) if s.kind != "class"}
        inside = set()
        for t in tests:
            qualname = ".".join(t.split("::")[1:]).split("[")[0]
            f = funcs.get(qualname)
            if f is not None and any(f.start_line <= n <= f.end_line for n in hits):
                out.add(t)
            if f is not None:
                inside |= set(range(f.start_line, f.end_line + 1))
        if hits - inside:
            out.update(tests)
    return out


def parses(w: Work) -> None:
    from featdel.lang import for_path

    for path, text in sorted(w.deletion.files.items()):
        lang = for_path(path)
        if text is not None and lang is not None and lang.has_syntax_error(text.encode(), path):
            raise Rejected("build.syntax", f"{path} does not parse after the deletion")


def reads(w: Work) -> None:
    """The original tree and the names the deletion removes, for the gates after this one."""
    w.original = w.ctx.original()
    w.names = removed_names(w.original, w.deletion.files, w.ctx.lang)
    w.gone = gone_doctests(w.ctx.collected, w.names)


def builds(w: Work) -> None:
    """The build check. Where the language can (pytest), its collecting run also runs the
    selection `tests_fail` will take if no test module fails collection: one test process
    for both, within one test run's timeout (at least 60 s, 10x the baseline suite, which
    collected the whole suite too), and `tests_fail` takes its outcomes."""
    tied, sample = _without_gone(w, *select_tests(w.ctx, w.deletion, w.opts, w.unimportable))
    run = None
    if tied and w.opts.merge_first_run:
        run = RunOptions(run_only=tied + sample, timeout_s=w.timeout(), extra_args=_continue(w.ctx, w.opts))
    failed, suite = w.ctx.build_check_and_run(w.fresh("build"), w.runner, w.deleted_files, w.names, w.unimportable,
                                              run)
    if suite is not None and run is not None:
        w.spent.append(suite.seconds)
    if failed:
        raise Rejected(*failed)
    if suite is not None and run is not None and not w.unimportable:
        w.first = (run.run_only, suite)


def _without_gone(w: Work, tied: list[str], sample: list[str]) -> tuple[list[str], list[str]]:
    """`select_tests`'s lists without the doctests the deletion takes with it."""
    return [t for t in tied if t not in w.gone], [t for t in sample if t not in w.gone]


def tied_tests(w: Work) -> None:
    tied, sample = select_tests(w.ctx, w.deletion, w.opts, w.unimportable)
    if not tied:
        raise Rejected("tests.untied", "no passing baseline test executes the deleted code")
    w.tied, w.sample = _without_gone(w, tied, sample)
    if not w.tied:
        raise Rejected("tests.only_own_doctests",
                       f"only the deleted code's own doctests execute it, e.g. {sorted(w.gone)[0]}")


def tests_fail(w: Work) -> None:
    """F2P candidates: the selected tests the first run fails (or misses). A test it passes can
    never be F2P, so the stub gate and the reruns (`stays_failing`) take only these."""
    selected = w.tied + w.sample
    if w.first is not None and w.first[0] == selected:
        first = w.judged(w.first[1])  # the build check's run took this selection
    else:
        first = w.run(w.fresh("run0"), selected)
    # sorted: the order of the lists a run took (tied first, then the rest) is not the task's, and
    # F2P is the same list whichever tests the selection tied
    failing = sorted(t for t in selected if _fails(first, t))
    if not failing:
        raise Rejected("tests.none_fail", f"none of the {len(w.tied)} tests tied to the deleted code fails")
    # A doctest's expected output sits in a source file the learner may edit (the grader carries
    # edits to it), so rewriting a docstring could pass it: never a reward.
    doctests = [t for t in failing if is_doctest(t)]
    w.failing = [t for t in failing if not is_doctest(t)]
    if not w.failing:
        raise Rejected("tests.only_doctests", f"only doctests fail ({len(doctests)}, e.g. {doctests[0]}); a "
                                              "learner could pass them by editing the docstring")


def stays_failing(w: Work) -> None:
    """F2P: of the candidates no stub passed, those that fail (or are missing) in every one of
    `reruns` runs, the first included."""
    # With `full_suite` every run takes the whole selection, as whole-suite validation does; the
    # verdict is the same (only the candidates can be F2P), the cost is that of the old way.
    again = w.tied + w.sample if w.opts.full_suite else w.failing
    runs = [w.run(w.fresh(f"run{i}"), again) for i in range(1, w.opts.reruns)]
    flipped = [t for t in w.failing if not all(_fails(r, t) for r in runs)]
    w.failing = [t for t in w.failing if t not in set(flipped)]
    if not w.failing:
        raise Rejected("reruns.flaky", f"outcomes changed across {w.opts.reruns} runs, e.g. {flipped[0]}")


def _fails(run: SuiteRun, test: str) -> bool:
    return Outcome(run.outcomes.get(test, Outcome.MISSING)).fails


def stubs_fail(w: Work) -> None:
    """Tests that a stub body (`pass`, `return None`, the first argument, an object equal to
    anything) makes pass leave F2P: a learner could earn them without the work. A variant runs
    only the tests no earlier one passed."""
    homes = {ref.partition("::")[0] for ref in w.deletion.deleted_symbols}
    for i, variant in enumerate(quality.stub_variants(w.original, w.deletion)):
        left = [t for t in w.failing if t not in w.stubbed]
        if not left:
            break
        # wiring the deletion cut elsewhere (a re-export, an `__all__` entry) comes back with the
        # stub, else the stub could never be imported and the gate would pass vacuously
        files = {p: t for p, t in variant.files.items() if p in homes or t is None}
        tree = w.variant(f"stub{i}", files)
        run = w.runner.run_suite(RunOptions(tests=left, timeout_s=w.timeout(), extra_args=_continue(w.ctx, w.opts)),
                                 tree=tree)
        w.spent.append(run.seconds)
        if run.broken and not run.timed_out:
            raise Broke(run.broken)
        w.stubbed |= {t: variant.label for t in sorted(run.passed() & set(left))}
    w.failing = [t for t in w.failing if t not in w.stubbed]
    if not w.failing:
        labels = ", ".join(sorted(set(w.stubbed.values()), key=quality.LABELS.index))
        raise Rejected("stub.passes", f"a stub body ({labels}) passes all {len(w.stubbed)} failing tests, "
                                      f"e.g. {sorted(w.stubbed)[0]}")


def not_similar(w: Work) -> None:
    start = w.fresh("audit", bytecode=False)
    w.start_sha256 = trees.tree_digest(start)
    similar = quality.similarity(w.deletion.removed, start, exclude=set(w.deletion.deleted_symbols),
                                 lang=None if w.ctx.lang.name == "python" else w.ctx.lang)
    w.similarity = round(similar.score, 4)
    if similar.score >= w.opts.max_similarity:
        raise Rejected("similar.copy", f"the deleted code is {similar.score:.2f} similar to {similar.nearest}, "
                                       "which the start state keeps")


def no_leak(w: Work) -> None:
    """No distinctive line of the deleted code in the start state (git objects decompressed),
    the environment or anything else the sandbox shows. Runs before any test does: a copy is
    a copy whatever the tests say. The problem statement, written from F2P, is audited last
    (`statement_clean`)."""
    start = w.tmp / "audit"
    lang = w.ctx.lang
    given = leaks.declared(w.original, w.deletion.deleted_symbols, w.deletion.keep_docstrings,
                           symbols_of=None if lang.name == "python" else lang.symbols)
    w.needles = leaks.needles(w.deletion.removed, w.original, w.deletion.files, given)
    if not w.needles:
        raise Rejected("leak.no_needle", "the deleted code has no distinctive line to audit for copies")
    hit = leaks.audit(w.needles, [start], {}) or _channels(w, start, w.needles) or _exposed(w, start, w.needles)
    if hit:
        raise Rejected("leak.found", f"deleted code found at {hit}")


def _channels(w: Work, start: Path, needles: list[str]) -> str | None:
    """A copy in a channel of the language (featdel.lang.base.LeakChannel) that a whole-line
    search of the start state misses: a source map's `sourcesContent`, one JSON string holding
    the original file. The other channels (node_modules, dist/, build/, .d.ts, .git) are files of
    the start state, which `leaks.audit` searches whole, or what the sandbox shows (`_exposed`)."""
    import json

    texts: dict[str, str] = {}
    for channel in w.ctx.lang.leak_channels:
        if channel.where != "tree" or not channel.glob.endswith(".map"):
            continue
        for path in sorted(start.glob(channel.glob)):
            if not path.is_file() or path.is_symlink():
                continue
            try:
                content = json.loads(path.read_text(errors="replace")).get("sourcesContent") or []
            except (ValueError, AttributeError):
                continue
            texts[f"{path.relative_to(start)} (sourcesContent)"] = "\n".join(c for c in content if isinstance(c, str))
    return leaks.audit(needles, [], texts) if texts else None


def statement_clean(w: Work) -> None:
    """The problem statement (written from the F2P tests) holds no distinctive deleted line."""
    w.statement = statement.write(w.deletion, w.original, w.failing)
    hit = leaks.audit(w.needles, [], {"problem_statement": w.statement})
    if hit:
        raise Rejected("leak.found", f"deleted code found at {hit}")


def _exposed(w: Work, start: Path, needles: list[str]) -> str | None:
    """A copy of the deleted code in anything else a test run shows (featdel.code.exposure). With
    docker the system directories are the image's, not this host's: only the binds count."""
    from featdel.env.testrun import suite_readonly
    from featdel.sandboxes.base import SandboxSpec
    from featdel.sandboxes.local import visible_roots

    env = w.ctx.env
    readonly = suite_readonly(env) if w.ctx.lang.name == "python" else w.ctx.lang.sandbox_readonly(env)
    roots = visible_roots(SandboxSpec(workdir=start, mount_at=env.src, readonly=readonly))
    if getattr(w.runner.backend, "name", "local") != "local":
        roots = [r for r in roots if not r.system]
    if w.ctx.lang.name != "python":
        # Python's by-name search knows import packages; an npm package is known by its name in
        # node_modules (a dependency that depends back on it, a nested install)
        copy = _installed_copy(env, start)
        return copy or exposure.audit(roots, needles, [])
    return exposure.audit(roots, needles, exposure.package_files(w.original, env.recipe.package_dirs))


def _installed_copy(env, start: Path) -> str | None:
    import json

    try:
        name = json.loads((start / "package.json").read_text()).get("name")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(name, str) or not name:
        return None
    for found in sorted(env.node_modules.glob(f"**/{name}/package.json")):
        if found.parent.parent.name == "node_modules" or found.parent.parent.parent.name == "node_modules":
            return f"{found.parent}: another copy of the package `{name}` in node_modules"
    return None


def noop_fails(w: Work) -> None:
    """The grader learners are scored by, given the empty patch, fails every F2P test. P2P is the
    whole stable passing baseline but F2P (never a sample): some of it may fail in the start
    state (tests a stub passes, tests coverage did not tie), and the fix must make those pass.
    Whether the empty patch fails is a question about F2P alone: the run takes only F2P (the
    whole P2P too with `full_suite`)."""
    w.p2p = [t for t in w.ctx.passing if t.split("::")[0] not in w.deleted_files and t not in set(w.failing)
             and t not in w.gone]
    noop = grade(w.grade_task(w.failing, w.p2p, run_p2p=None if w.opts.full_suite else ()), "",
                 w.runner.backend, runner=w.runner, bytecode=w.bytecode(), tracebacks=w.opts.tracebacks)
    w.spent.append(noop.seconds)
    if noop.status == GradeStatus.BROKEN:
        raise Broke(noop.reason)
    if noop.status == GradeStatus.RESOLVED or any(o == Outcome.PASSED for o in noop.fail_to_pass.values()):
        passing = sorted(t for t, o in noop.fail_to_pass.items() if o == Outcome.PASSED)
        raise Rejected("noop.passes", f"the unchanged start state passes {passing[0] if passing else 'every test'}")


def gold_resolves(w: Work) -> None:
    """The grader, given the gold patch, resolves the task. The gold tree is the original tree,
    whose every P2P test passed the baseline three times, so the run takes what the change can
    affect (`affected`); the whole P2P with `full_suite`. A change-scoped run that does not
    resolve is taken again over the whole P2P, and that run decides: a test can pass in the
    whole suite's order and fail in a subset's (mpmath's `test_matrix_basic` fails after a
    doctest that sets `mp.pretty = True` when the tests that set it back do not run between),
    and a learner is graded on the whole suite (bench/validation_selection.py)."""
    def run_gold(scope: tuple[str, ...] | None):
        result = grade(w.grade_task(w.failing, w.p2p, run_p2p=scope), w.patch, w.runner.backend, runner=w.runner,
                       bytecode=w.bytecode(), tracebacks=w.opts.tracebacks)
        w.spent.append(result.seconds)
        return result

    def settled(scope: tuple[str, ...] | None):
        gold = run_gold(scope)
        bound = canaries.name_bound(gold.findings) if gold.status == GradeStatus.SUSPECT else set()
        if bound and set(w.failing) - bound:
            # Tests whose twins fail beside them (bound to their own name, or to running once per
            # process) would fail every learner's run too: they leave F2P (and stay out of P2P)
            # and the gold run is taken again.
            w.failing = [t for t in w.failing if t not in bound]
            gold = run_gold(scope)
        return gold

    scope = None if w.opts.full_suite else affected(w)
    gold = settled(scope)
    if scope is not None and gold.status not in (GradeStatus.RESOLVED, GradeStatus.BROKEN):
        gold = settled(None)
    if gold.status == GradeStatus.BROKEN:
        raise Broke(gold.reason)
    if gold.status != GradeStatus.RESOLVED:
        raise Rejected("gold.unresolved", f"the gold patch is {gold.status}: {gold.reason}")


def affected(w: Work) -> tuple[str, ...]:
    """The P2P tests a change-scoped gold run takes: those the coverage map ties to the deleted
    code, those a stub variant passed, those in test modules that import a changed module, the
    seeded sample the F2P runs took, and every test of the F2P test files. The last because the
    grader's twins run there, after those tests, in the state they leave: pyparsing's
    `test_example_rr_diags` passes beside its twin when few tests of test_diagram.py ran and
    fails beside it after all of them, so a gold run without them kept in F2P a test whose twin
    fails when a learner is graded on the whole suite (bench/validation_selection.py)."""
    files = w.ctx.test_modules_importing(set(w.deletion.files)) | {t.split("::")[0] for t in w.failing}
    wanted = set(w.tied) | set(w.stubbed) | set(w.sample)
    return tuple(t for t in w.p2p if t in wanted or t.split("::")[0] in files)


# The rules that run no test come first: a near copy or a leak costs no test run.
GATES = [parses, reads, not_similar, no_leak, builds, tied_tests, tests_fail, stubs_fail, stays_failing,
         statement_clean, noop_fails, gold_resolves]

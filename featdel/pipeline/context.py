"""A mined repository, loaded once for deleting from it and verifying its deletions.

In: a run directory and a mined `RepoRecord`. Out: `RepoContext` (its language, environment,
snapshot, coverage map and baseline), and the strategies' check (`make_check`): apply an edit to
a copy of the original tree and run the language's build check (featdel.env.buildcheck for
Python, featdel.lang.javascript.buildcheck) in the sandbox.

What every candidate of a repository needs and none changes is computed once per repository and
process, on first use: the original tree (extracted once, read only by the gates), which test
modules import which module, and the original's bytecode (featdel.env.bytecode). The context is
shared by the verifying threads, hence the lock.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from featdel.code import trees
from featdel.code.coverage_map import CoverageMap
from featdel.core.records import Baseline, RepoRecord
from featdel.core.rundir import RunDir
from featdel.env import envs
from featdel.env.testrun import SuiteRunner
from featdel.lang import language
from featdel.lang.base import Language


class Broke(Exception):
    """The sandbox or environment broke: a `broken` verdict, never a rejection."""


@dataclass
class RepoContext:
    """What deleting from one repository and verifying its deletions need, loaded once."""

    record: RepoRecord
    env: envs.Env
    snapshot: Path
    cmap: CoverageMap
    baseline: Baseline
    passing: list[str]  # stable passing baseline tests
    collected: set[str]
    image: str | None = None  # docker backend: the per-repo image
    lang: Language = field(default_factory=lambda: language("python"))
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    _original: Path | None = field(default=None, repr=False)
    _test_imports: dict[str, tuple[str, ...]] | None = field(default=None, repr=False)
    _bytecode: dict[str, bytes] | None = field(default=None, repr=False)
    bytecode_file: Path | None = None  # where the original's bytecode is kept for the run's next stage
    _differ: object | None = field(default=None, repr=False)

    @classmethod
    def load(cls, run_dir: Path, record: RepoRecord) -> RepoContext:
        rd = RunDir(run_dir)
        lang = language(record.language)
        env = lang.load_env(Path(record.env_dir))
        if env is None:
            raise Broke(f"environment {record.env_dir} is missing; run `featdel mine` again")
        baseline = rd.load_baseline(record.name)
        return cls(record=record, env=env, snapshot=rd.snapshot(record.name),
                   cmap=CoverageMap.load(rd.coverage(record.name)), baseline=baseline, passing=baseline.passing(),
                   collected=set(baseline.tests), image=record.image_name, lang=lang,
                   bytecode_file=rd.repo_dir(record.name) / "bytecode.zip")

    def runner(self, backend, *, warm: bool = True) -> SuiteRunner:
        """A runner of this repository's suite in its language (a `SuiteRunner` or a subclass)."""
        return self.lang.runner(self.env, backend, image=self.image, warm=warm)

    def original(self) -> Path:
        """The original tree, extracted on first use and kept while the context lives. Never
        written: a gate that needs a tree to change takes its own (`trees.start_state`)."""
        with self._lock:
            if self._original is None:
                tmp = Path(tempfile.mkdtemp(prefix="featdel-original-"))
                weakref.finalize(self, shutil.rmtree, tmp, True)
                self._original = trees.extract(self.snapshot, tmp / "original")
            return self._original

    def diff(self, files: dict[str, str | None]) -> tuple[str, str]:
        """(deletion patch, gold patch) of the edits `files` to the original: `trees.diff`'s, from
        one hashing of the original per context (featdel.code.hostgit.EditDiffer)."""
        from featdel.code.hostgit import EditDiffer

        original = self.original()  # takes the lock itself
        with self._lock:
            if self._differ is None:
                self._differ = EditDiffer(original)
                weakref.finalize(self, self._differ.close)
        if not self._differ.plain(files):
            return trees.diff(self.snapshot, files)
        return self._differ.diff(files)

    def bytecode(self, runner: SuiteRunner, timeout_s: float) -> dict[str, bytes]:
        """The original tree's bytecode, compiled once per run directory (featdel.env.bytecode:
        kept in `bytecode_file` for the stages after the first); none outside Python."""
        from featdel.env import bytecode

        if self.lang.name != "python":
            return {}
        original = self.original()  # takes the lock itself
        with self._lock:
            if self._bytecode is None:
                key = f"{trees.digest(self.snapshot.parent, self.snapshot.name)} {self.env.root}"
                kept = bytecode.load(self.bytecode_file, key) if self.bytecode_file else None
                if kept is None:
                    with tempfile.TemporaryDirectory(prefix="featdel-bytecode-") as tmp:
                        kept = bytecode.harvest(runner, original, Path(tmp), timeout_s)
                    if self.bytecode_file is not None:
                        bytecode.save(self.bytecode_file, kept, key)
                self._bytecode = kept
            return self._bytecode

    def test_modules_importing(self, paths: set[str]) -> set[str]:
        """The baseline's test modules with an import statement that loads the module of one of
        `paths` (or a submodule of it), by file layout (featdel.code.imports)."""
        from featdel.code.imports import module_name

        original = self.original()
        if self.lang.name != "python":  # no import graph outside Python: every test file may see it
            return {t.split("::")[0] for t in self.collected}
        with self._lock:
            if self._test_imports is None:
                self._test_imports = _test_imports(original, {t.split("::")[0] for t in self.collected})
        files = {p.relative_to(original).as_posix() for p in original.rglob("*.py")}
        changed = {m for p in paths if (m := module_name(p, files))}
        return {test for test, loaded in self._test_imports.items()
                if any(m == c or m.startswith(c + ".") for m in loaded for c in changed)}

    def build_check(self, tree: Path, runner: SuiteRunner, deleted_files: set[str],
                    deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None):
        return self.lang.build_check(self.env, self.collected, tree, runner, deleted_files, deleted_names, allowed_out,
                                     set(self.baseline.collect_errors))

    def build_check_and_run(self, tree: Path, runner: SuiteRunner, deleted_files: set[str], deleted_names: set[str],
                            allowed_out: set[str], run):
        """`build_check`, with `run` (`RunOptions.run_only`) taken by the same test process where
        the language can: (None or the failure, that run or None)."""
        return self.lang.build_check_and_run(self.env, self.collected, tree, runner, deleted_files, deleted_names,
                                             allowed_out, set(self.baseline.collect_errors), run)


def _test_imports(original: Path, test_files: set[str]) -> dict[str, tuple[str, ...]]:
    """test module -> every module its import statements may load."""
    from featdel.code.imports import imports_of
    from featdel.code.spans import parse

    files = {p.relative_to(original).as_posix() for p in original.rglob("*.py")}
    out = {}
    for rel in sorted(test_files & files):
        tree = parse((original / rel).read_bytes())
        out[rel] = tuple(sorted({m for ref in imports_of(tree, rel, files) for m in ref.modules}))
    return out


def removed_names(original: Path, edits: dict[str, str | None], lang: Language | None = None) -> set[str]:
    """The names an edit of the original tree removes (featdel.code.gone for Python)."""
    return (lang or language("python")).removed_names(original, edits)


def make_check(ctx: RepoContext, backend) -> CheckFactory:
    """The strategies' check factory for `ctx` (a `CheckFactory`)."""
    return CheckFactory(ctx, backend)


class CheckFactory:
    """The strategies' check factory: original tree -> check(edits) -> True or the reason. The
    edited tree gets the original's bytecode beside the files the edit left alone. The checks of
    one factory share a warm runner, and its warm pytest (featdel.env.zygote), opened at the first
    check of each thread; `close()` ends them (the delete stage calls it after the repository)."""

    def __init__(self, ctx: RepoContext, backend) -> None:
        self.ctx, self.backend = ctx, backend
        self._local = threading.local()
        self._runners: list[SuiteRunner] = []
        self._lock = threading.Lock()

    def _runner(self) -> SuiteRunner:
        runner = getattr(self._local, "runner", None)
        if runner is None:
            runner = self._local.runner = self.ctx.runner(self.backend).__enter__()
            runner.zygote = True
            with self._lock:
                self._runners.append(runner)
        return runner

    def close(self) -> None:
        with self._lock:
            runners, self._runners = self._runners, []
        for runner in runners:
            runner.close()

    def __call__(self, original: Path):
        from featdel.env.bytecode import overlay

        ctx = self.ctx

        def check(edits):
            with tempfile.TemporaryDirectory(prefix="featdel-check-") as tmp:
                tree = Path(tmp) / "t"
                shutil.copytree(original, tree, symlinks=True)
                trees.apply_edits(tree, edits)
                deleted = {p for p, text in edits.items() if text is None}
                runner = self._runner()
                overlay(tree, ctx.bytecode(runner, 600.0), set(edits))  # featdel.env.bytecode
                failed = ctx.build_check(tree, runner, deleted, removed_names(original, edits, ctx.lang))
            return True if failed is None else failed[1]

        return check

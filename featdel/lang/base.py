"""What is language-specific, as one protocol: `Language`, and the small records it hands out.

In: a repository tree, a file's bytes and path, or an environment. Out: which files are code and
which are tests, symbol spans (`featdel.code.spans.Symbol`, the same record for every language),
syntax checks, the stub text and stub-gate bodies of a function, the files a patch never
changes (runner configuration), where a copy of the original could hide, the tamper patterns
added lines are matched against, and the environment and test-run hooks: build an env, open a
runner, map coverage. Each language is one package or module under `featdel/lang/` providing
these; `featdel.lang.LANGUAGES` names them and `featdel.lang.detect_language` picks one.

The edits a deletion strategy makes (a body stubbed, definitions removed, their export wiring
taken out) are `Edits`, a language's `edits`. Python's predate the seam and live in
`featdel/deletion/` (splice, body, wiring, equal_stub), above this layer: the Python language
has `edits = None` and the strategies use their own code for it. Every other language brings
its `Edits`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from featdel.code.spans import Symbol
from featdel.core.errors import FeatdelError

if TYPE_CHECKING:
    from featdel.code.coverage_map import CoverageMap
    from featdel.core.records import Recipe
    from featdel.env.testrun import RunOptions, SuiteRun

__all__ = ["Edit", "EditRefused", "Edits", "Files", "Language", "LeakChannel", "Runner", "Splice", "StubBody",
           "Symbol", "TamperPattern", "Wired"]


class EditRefused(FeatdelError):
    """A language cannot make this edit safely (a definition shares its line, a body is already a
    stub); the deletion layer records it as `NotApplicable` with this message."""


class AlreadyStub(EditRefused):
    """The body is a stub already (empty, or only throws): stubbing it would delete nothing."""


@dataclass(frozen=True, slots=True, order=True)
class Splice:
    """Bytes [start, end) of the original replaced by `text`; several apply in one pass."""

    start: int
    end: int
    text: bytes


def apply(source: bytes, splices: list[Splice]) -> bytes:
    """`source` with every splice applied; they are computed on the original bytes, never overlap."""
    out, pos = [], 0
    for s in sorted(splices):
        if s.start < pos:
            raise ValueError(f"overlapping splices at byte {s.start}")
        out += [source[pos : s.start], s.text]
        pos = s.end
    out.append(source[pos:])
    return b"".join(out)


@dataclass(frozen=True, kw_only=True, slots=True)
class Edit:
    """One file's edit: its splices on the original bytes, and the original text each took out."""

    splices: list[Splice]
    removed: list[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class Wired:
    """Definitions removed together with what wires them into the package: the new text of every
    file it touches (the defining one included), and what was taken out besides the definitions,
    for the record (`"path::name (re-export)"`)."""

    files: dict[str, str] = field(default_factory=dict)
    labels: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.labels)


@dataclass(frozen=True, kw_only=True, slots=True)
class StubBody:
    """One trivial body of the stub gate: `label` as the verify stage records it, `text` the
    body's replacement (for braces languages, the whole block with its braces)."""

    label: str
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LeakChannel:
    """A place a copy of the original code could hide from the start state's own audit:
    `where` is "tree" (relative to the repository) or "env" (relative to the env root), `glob`
    a pathlib pattern, `why` what it holds."""

    where: str
    glob: str
    why: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TamperPattern:
    """A line a patch adds in this language that reaches for the grader: `rule` as the tamper
    scan names its findings, `pattern` searched in the added line, `why` for the report. `fold`,
    where the language has one, writes out the names a line builds at run time (JavaScript's:
    featdel.lang.javascript.folding); the pattern is searched in the line and in its fold."""

    rule: str
    pattern: re.Pattern[str]
    why: str
    fold: Callable[[str], str] | None = None

    def search(self, line: str) -> bool:
        return self.pattern.search(line) is not None or (
            self.fold is not None and self.pattern.search(self.fold(line)) is not None)


@dataclass(frozen=True, kw_only=True, slots=True)
class TamperRule:
    """A check a line alone cannot make, over a whole carried file of this language: `find(text)`
    gives (line, why) for each line it flags (JavaScript's: a write to a module the file imports,
    featdel.lang.javascript.folding.module_writes). Lives among `tamper_patterns`."""

    rule: str
    find: Callable[[str], list[tuple[int, str]]]


class Files(Protocol):
    """A read-only view of a repository (featdel.deletion.base.Tree is one)."""

    root: Path

    def read(self, rel: str) -> bytes: ...

    def source_paths(self) -> list[str]: ...

    def symbols(self, rel: str) -> list[Symbol]: ...


class Runner(Protocol):
    """Runs an env's suite in sandboxes (featdel.env.testrun.SuiteRunner is Python's): a context
    manager that keeps its sandbox warm across `run_suite` calls until `close`."""

    def __enter__(self) -> Runner: ...

    def __exit__(self, *exc: object) -> None: ...

    def run_suite(self, options: RunOptions = ..., *, tree: Path | None = None) -> SuiteRun: ...

    def close(self) -> None: ...


class Edits(Protocol):
    """The strategies' edits of one language, on original bytes (so they compose and roll back)."""

    labels: tuple[str, ...]  # the stub gate's labels, in the order `stub_variants` gives them

    def stub_body(self, symbol: Symbol, source: bytes) -> str:
        """The text that replaces the body of a function or method (`throw new Error(...)`)."""
        ...

    def stub_variants(self, symbol: Symbol, source: bytes) -> list[StubBody]:
        """The stub gate's trivial bodies for one function or method, one per label."""
        ...

    def body_splice(self, symbol: Symbol, source: bytes, text: str) -> Splice:
        """The splice that puts `text` (a `stub_body` or a `StubBody.text`) in place of the body."""
        ...

    def stub(self, source: bytes, found: list[Symbol]) -> Edit:
        """Every definition in `found` (one qualname in one file) with its body stubbed; raises
        `AlreadyStub` when none has a body worth stubbing."""
        ...

    def remove(self, source: bytes, found: list[Symbol]) -> Edit:
        """The definitions removed whole, with comments attached to them, the file still valid."""
        ...

    def wired_removal(self, files: Files, home: str, found: list[Symbol]) -> Wired:
        """`found` (one qualname in `home`) removed with what exports and re-exports it, across
        files; empty labels when nothing wires it."""
        ...

    def importers(self, files: Files, rel: str) -> list[str]:
        """`"path:line"` of every source file that loads `rel` when it is itself loaded."""
        ...


class Language(Protocol):
    name: str  # recorded in every row: "python", "javascript"
    suffixes: tuple[str, ...]  # the file names this language reads, by ending
    edits: Edits | None  # None: the deletion layer's own (Python's, see the module docstring)
    leak_channels: tuple[LeakChannel, ...]
    tamper_patterns: tuple[TamperPattern | TamperRule, ...]  # on top of the grader's own scan

    def detect(self, tree: Path) -> bool:
        """Is `tree` a repository of this language (from its files alone)?"""
        ...

    def source_files(self, root: Path) -> list[Path]:
        """Every file of the language under `root`, tests included, vendored and built output
        left out; sorted."""
        ...

    def is_test_path(self, rel: str) -> bool: ...

    def parse(self, source: bytes, path: str):
        """The tree-sitter tree of one file."""
        ...

    def symbols(self, source: bytes, path: str) -> list[Symbol]: ...

    def has_syntax_error(self, source: bytes, path: str) -> bool: ...

    def protected_files(self, tree: Path) -> set[str]:
        """Files of `tree` (relative POSIX paths) whose content always comes from the task:
        what configures the test runner or the interpreter."""
        ...

    def is_protected_name(self, name: str) -> bool:
        """A file name that is protected wherever it stands (runner and interpreter config)."""
        ...

    continue_args: tuple[str, ...]  # runner arguments that keep a run going past a file that fails to load
    # runner arguments that report a failure in one line, not a traceback: for runs whose outcomes
    # are all that is read (pytest spends two thirds of a run of 41 failing tests on tracebacks)
    quiet_args: tuple[str, ...]
    coverage_name: str  # what `RunOptions.coverage_to` names in a run's folder: a file or a directory

    def dialect(self, tree: Path) -> str:
        """The name recorded in every row for `tree`: the language's `name`, or a dialect of it
        ("typescript" for a JavaScript tree written in TypeScript)."""
        ...

    def recipe(self, tree: Path) -> Recipe:
        """How to install `tree` and run its tests."""
        ...

    def build_env(self, source, recipe: Recipe, *, tree_ready: Path | None = None):
        """The cached environment of `source` (a `featdel.env.sources.PinnedSource`) under
        `recipe`; `tree_ready` is a checkout of it to move into place."""
        ...

    def load_env(self, root: Path):
        """The built environment at `root` (a build directory or an `env_id` link), or None."""
        ...

    def install_files(self, env_root: Path) -> list[dict]:
        """What the env's install read besides the tree ({"path", "text"}, relative to the env root),
        recorded in its env row so `rebuild_env` needs nothing else (JavaScript: package.json and
        the lock npm installed from; Python: nothing, its row's `lock` says it all)."""
        ...

    def rebuild_env(self, row, backend: str) -> tuple[str, bool]:
        """(env directory or image name, built now) for a `featdel.core.shards.EnvRow`, from the
        row alone: `backend` "local" builds it in this machine's cache, "docker" the image
        `image_tag(row.env_id)` with the env at fixed paths and an empty /testbed."""
        ...

    def image_env(self, row):
        """The env of a row as `rebuild_env(row, "docker")` baked it (a runner runs the suite in
        that image, the tree mounted at /testbed), or None when this engine has no such image."""
        ...

    def repo_image(self, env) -> str:
        """The per-repo docker image mining records (`featdel run --sandbox docker`): the base image
        and the runtime `env` runs on, at the host paths its runs name."""
        ...

    def runner(self, env, backend, image: str | None = None, *, warm: bool = True) -> Runner:
        """A runner of `env`'s suite: one warm sandbox (a context manager), or a fresh one per run."""
        ...

    def sandbox_readonly(self, env) -> tuple[Path, ...]:
        """What a test run shows read-only besides the tree (the leak audit searches it)."""
        ...

    def removed_names(self, original: Path, edits: dict[str, str | None]) -> set[str]:
        """The names an edit of the original tree removes (what a test's failed import may name)."""
        ...

    def build_check(self, env, collected: set[str], tree: Path, runner: Runner, deleted_files: set[str],
                    deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None,
                    baseline_errors: set[str] = frozenset()) -> tuple[str, str] | None:
        """Does the edited `tree` still load its package and collect the baseline's tests? None, or
        (rule, reason); a test file that fails only for a deleted name goes into `allowed_out`."""
        ...

    def build_check_and_run(self, env, collected: set[str], tree: Path, runner: Runner, deleted_files: set[str],
                            deleted_names: set[str] = frozenset(), allowed_out: set[str] | None = None,
                            baseline_errors: set[str] = frozenset(), run=None):
        """`build_check`, and the run of `run` (a `RunOptions` with `run_only`) from the same
        test process where the runner can collect everything and run some (pytest): (None or
        the failure, that run or None); a language that cannot returns `(build_check(...), None)`
        and the caller starts the run itself."""
        ...

    def coverage_map(self, src: Path, package_dirs: list[str], data: Path, allowed: set[str]) -> CoverageMap:
        """Which allowed tests run each symbol's body, from the coverage data a run left at `data`."""
        ...

    def plant_canaries(self, tree: Path, fail_to_pass: list[str], env, held: list = ()) -> list[tuple[str, str, str]] | None:
        """Add the grader's canary tests to the F2P test files under `tree` (the graded tree):
        (node id, kind, original) per canary, kind `must_fail`, `must_pass`, or `twin`, `fresh`,
        `perturbed` or `held_out` of the F2P test `original` ("" for the others), as
        featdel.grading.canaries.Canary judges them; None where the grader plants its own
        (Python's, featdel.grading.canaries). `held`: what `capture_held_out`'s run found."""
        ...

    def capture_held_out(self, tree: Path, fail_to_pass: list[str], env):
        """Plant, in the reference tree `tree` (the start state with the gold patch), copies of
        F2P tests with one input changed that record what the reference computes for it. An
        object with `ids` (the copies: the grader runs just these on `tree`) and
        `values(tree, outcomes)` (what `plant_canaries` takes as `held`), or None where the
        grader captures its own (Python's: featdel.grading.held_out)."""
        ...


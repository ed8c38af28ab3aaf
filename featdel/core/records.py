"""Records handed between stages (frozen dataclasses), and their JSON Lines form.

mine -> `RepoRecord` (repos.jsonl) and `Baseline` (repos/NAME/baseline.json); delete ->
`Candidate` then `Deletion` (deletions.jsonl), and `Steering` when a learner's model chose the
knobs (steering.jsonl); verify -> `Verdict` (verdicts.jsonl); package -> Parquet rows
(featdel.core.shards). Lists stay lists; statuses and test outcomes are StrEnums (equal to their
strings). `to_json`/`from_dict` round-trip any of them through one JSON object per line.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
import types
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class Outcome(StrEnum):
    """One test's outcome in one run, as the report plugin records it, plus what featdel infers."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    XPASSED = "xpassed"
    MISSING = "missing"  # asked for, but the run has no outcome for it (its module did not import)
    NOT_COLLECTED = "not collected"  # not among the run's collected tests

    @property
    def fails(self) -> bool:
        """Counts as failing for F2P: failed, an error, or no outcome at all (a skip does not)."""
        return self in (Outcome.FAILED, Outcome.ERROR, Outcome.MISSING, Outcome.NOT_COLLECTED)


class RepoStatus(StrEnum):
    MINED = "mined"  # usable: environment built, baseline and coverage recorded
    REJECTED = "rejected"  # the repo misses a threshold or its tests do not behave
    BROKEN = "broken"  # the source, environment or sandbox broke


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Recipe:
    """How a repo's environment is built and its tests run: recorded on every task."""

    python: str  # "3.11.7"
    install: list[list[str]]  # argv lists, run in order inside the repo with the venv active
    test_cmd: list[str]  # argv, e.g. ["python", "-m", "pytest", "-p", "no:cacheprovider"]
    package_dirs: list[str]  # import roots relative to the repo ("src/pkg" or "pkg")
    # What the install produced: every distribution in the venv as `NAME==VERSION` (pip freeze
    # --all, the repo itself left out), sorted. Filled in after the build, so not part of `key()`.
    lock: list[str] = dataclasses.field(default_factory=list)

    def key(self) -> str:
        """The cache key of the requested recipe: everything but the `lock` it produced."""
        import hashlib

        wanted = {k: v for k, v in dataclasses.asdict(self).items() if k != "lock"}
        blob = json.dumps(wanted, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class RepoRecord:
    source: str
    name: str
    commit: str | None = None
    language: str = "python"  # featdel.lang: "python", "javascript" or "typescript", detected at mine time
    recipe: Recipe | None = None
    env_dir: str | None = None
    image_name: str | None = None  # docker backend: the per-repo image the tests run in
    collected: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    flaky: int = 0
    suite_seconds: float = 0.0
    coverage: float = 0.0  # percent of package lines executed by the suite
    # test modules that could not be collected at baseline, "path: error", left out of the suite
    left_out: list[str] = dataclasses.field(default_factory=list)
    status: RepoStatus = RepoStatus.BROKEN
    reason: str = ""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Candidate:
    """A tested symbol that a strategy may delete."""

    repo: str  # RepoRecord.name
    path: str  # file, relative to the repo root
    qualname: str
    kind: str  # "function" | "method" | "class" | "file"
    lines: int
    tests: list[str]  # passing, non-flaky test node ids that execute it


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Deletion:
    """A strategy's edit of the original tree. `files` maps a path to its new text, or to None
    when the file is removed. `removed` holds the deleted source snippets (for the leak audit)."""

    deletion_id: str
    repo: str
    strategy: str
    target: str  # "path::qualname" of the candidate it started from
    deleted_symbols: list[str]  # "path::qualname" of every symbol removed or stubbed
    files: dict[str, str | None]
    removed: list[str]
    keep_docstrings: bool = True
    seed: int = 0
    # the part of deleted_symbols whose body was stubbed rather than the definition removed
    stubbed_symbols: list[str] = dataclasses.field(default_factory=list)
    # "path::qualname" a strategy tried to delete but kept because the check failed
    rolled_back: list[str] = dataclasses.field(default_factory=list)
    # "path::name (what)" of wiring removed with the symbols: re-exports, `__all__` entries,
    # aliases, registrations (not symbols: no definition of the name lives there)
    wiring: list[str] = dataclasses.field(default_factory=list)
    # a `combine` deletion: the deletion ids it joins
    parts: list[str] = dataclasses.field(default_factory=list)
    # a problem statement the deletion came with (the `agent` strategy's model may write one):
    # verify leak-audits it and packages it in place of the generated one; "" means generate
    statement: str = ""
    # what making it cost a language model (the `agent` strategy): requests, prompt_tokens,
    # completion_tokens as the server reported them (featdel.core.llm.ChatClient.usage)
    usage: dict[str, int] = dataclasses.field(default_factory=dict)


def to_json(record: Any) -> str:
    return json.dumps(dataclasses.asdict(record), sort_keys=True)


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    kwargs = {}
    for name, hint in _fields(cls):
        if name in data:
            kwargs[name] = _coerce(hint, data[name])
    return cls(**kwargs)


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, resolved type) of each field of the dataclass `cls`: resolving the annotations is
    most of reading a record, and a run reads its verdicts again and again."""
    hints = typing.get_type_hints(cls)
    return tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))


def _coerce(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return _coerce(inner[0], value) if len(inner) == 1 else value
    if dataclasses.is_dataclass(tp):
        return from_dict(tp, value)
    if isinstance(tp, type) and issubclass(tp, StrEnum):
        return tp(value)
    return value


def read_jsonl(path: Path, cls: type[T]) -> list[T]:
    """Every record of `path`; never half a line another thread of this process is appending."""
    if not path.exists():
        return []
    with _APPENDING:
        text = path.read_text()
    return [from_dict(cls, json.loads(line)) for line in text.splitlines() if line.strip()]


_APPENDING = threading.Lock()


def append_jsonl(path: Path, record: Any) -> None:
    """Append one record and flush, so a crashed run keeps what it finished. One line at a time
    in this process: threads (the delete stage's repositories) never interleave two records."""
    line = to_json(record) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with _APPENDING, path.open("a") as fh:
        fh.write(line)


class VerdictStatus(StrEnum):
    VERIFIED = "verified"  # every rule held: a task
    REJECTED = "rejected"  # the deletion or the tests did not behave (`rule` says which)
    REFUSED = "refused"  # the strategy declined the candidate before any edit: not a candidate at all
    BROKEN = "broken"  # the sandbox or the environment broke: says nothing about the deletion


# Every verdict carries one rule code: "<stage>.<what>", short and stable, for summaries and
# queries; `reason` is the prose for people. docs/verification.md lists them.
RULES = {
    "delete.refused": "the strategy does not apply to the candidate",
    "delete.crash": "the strategy crashed on the candidate",
    "build.rolled_back": "the build check refused every step of the deletion",
    "build.syntax": "an edited file does not parse",
    "build.import": "the package no longer imports",
    "build.collect": "the baseline tests no longer collect",
    "tests.untied": "no passing baseline test executes the deleted code",
    "tests.only_own_doctests": "only the deleted code's own doctests execute it",
    "tests.none_fail": "no test tied to the deleted code fails",
    "tests.only_doctests": "only doctests fail (a docstring edit could pass them)",
    "tests.timeout": "the tests did not finish in time",
    "reruns.flaky": "outcomes changed across the reruns",
    "stub.passes": "a stub body passes every failing test",
    "similar.copy": "the start state keeps a near copy of the deleted code",
    "leak.no_needle": "the deleted code has no distinctive line to audit",
    "leak.found": "a copy of the deleted code is reachable",
    "noop.passes": "the unchanged start state passes an F2P test",
    "gold.unresolved": "the gold patch does not resolve the task",
    "sandbox.broke": "the sandbox or environment broke",
    "sandbox.unavailable": "the repository's context could not be loaded",
    "sandbox.worker_died": "the Ray worker died on every try",
    "crash": "featdel crashed on the candidate (a bug: see the traceback)",
    "done": "every rule held",
}


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Verdict:
    deletion_id: str
    repo: str
    strategy: str
    target: str
    status: VerdictStatus
    stage: str  # where it ended: delete, build, tests, stub, similar, leak, noop, gold, reruns, done
    reason: str = ""  # for people
    rule: str = ""  # for machines: a key of RULES ("build.import", "noop.passes", ...)
    FAIL_TO_PASS: list[str] = dataclasses.field(default_factory=list)
    PASS_TO_PASS: list[str] = dataclasses.field(default_factory=list)
    test_seconds: float = 0.0  # sandbox seconds spent running tests for this candidate
    image_name: str | None = None
    # What verification checked, so that packaging ships exactly that (verified verdicts only).
    deletion_patch: str = ""
    patch: str = ""
    problem_statement: str = ""
    start_sha256: str = ""  # the start state's content (trees.tree_digest)
    similarity: float = 0.0  # to the nearest code the start state keeps (featdel.deletion.quality)
    stub_passed: list[str] = dataclasses.field(default_factory=list)  # left F2P: a trivial body passes them
    timeout_s: float = 0.0  # per test run, for grading
    traceback: str = ""  # a crash while verifying (stage "crash")
    verified_at: str = ""  # ISO 8601 UTC, set when verified: the task's `created_at`

    def stamped(self) -> Verdict:
        """This verdict with `verified_at` set to now."""
        import datetime as dt

        return dataclasses.replace(self, verified_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class BaselineTest:
    outcomes: list[Outcome]  # one per baseline run
    flaky: bool
    duration: float = 0.0  # seconds, last run


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Baseline:
    """A repository's baseline (repos/NAME/baseline.json): every test's outcome in each run."""

    runs: int
    suite_seconds: list[float]
    tests: dict[str, BaselineTest]
    collect_errors: list[str] = dataclasses.field(default_factory=list)

    def passing(self) -> list[str]:
        """The stable passing tests: passed in every run."""
        return sorted(t for t, b in self.tests.items() if not b.flaky and set(b.outcomes) == {Outcome.PASSED})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(dataclasses.asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> Baseline:
        data = json.loads(path.read_text())
        tests = {t: BaselineTest(outcomes=[Outcome(o) for o in v["outcomes"]], flaky=v["flaky"],
                                 duration=v.get("duration", 0.0)) for t, v in data["tests"].items()}
        return cls(runs=data["runs"], suite_seconds=data["suite_seconds"], tests=tests,
                   collect_errors=data.get("collect_errors", []))


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Steering:
    """The knobs a learner's difficulty model chose for a deletion (steering.jsonl), and the pass
    rate it predicted; `package` stores all but `estimate` in the task's `steering` column."""

    deletion_id: str
    learner: str
    target_pass_rate: float
    predicted_pass_rate: float
    strategy: str
    docstrings_kept: bool = True
    tests_visible: bool = True
    combined: int = 1
    estimate: dict = dataclasses.field(default_factory=dict)  # the features the prediction used

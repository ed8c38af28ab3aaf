"""What every deletion strategy shares: the protocol, the check contract, the read-only tree.

In: the original repository (`root`, never written), a `Candidate`, and a caller-supplied
`check`. Out: a `Deletion` whose `files` hold the full new text of each changed file (None for a
removed file), or a `NotApplicable` saying why the strategy does not fit.

The check is the caller's because only the caller knows how the repository imports and collects
(sandbox, environment, pytest); strategies only promise to call it after each step and to roll a
step back when it does not answer exactly `True` (a reason string is truthy, so `is True`).

Languages: the tree's files, parse trees and symbols are its language's (featdel.lang:
`detect_language` for the tree, `for_path` for one file), and a strategy names the languages it
edits (`languages`); Python's edits are this package's own, other languages' are their `edits`.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from featdel.code.spans import Symbol, has_syntax_error
from featdel.core.errors import FeatdelError
from featdel.core.records import Candidate, Deletion
from featdel.lang import detect_language, for_path
from featdel.lang.base import Language

Edits = dict[str, str | None]
Check = Callable[[Edits], "bool | str"]


class NotApplicable(FeatdelError):
    """The strategy does not fit this candidate; the message is the reason to record."""


class RolledBack(NotApplicable):
    """Every step the strategy tried was rolled back because the check failed."""


class UnknownStrategy(FeatdelError):
    """A strategy name that is not in the registry."""


class Strategy(Protocol):
    name: str
    kinds: frozenset[str]  # candidate kinds the strategy can start from

    def fits(self, candidate: Candidate) -> bool:
        """Cheap test on the record alone (no I/O): worth calling `apply` at all?"""
        ...

    def apply(
        self,
        root: Path,
        candidate: Candidate,
        *,
        check: Check,
        keep_docstrings: bool,
        rng: random.Random,
    ) -> Deletion: ...


PYTHON_ONLY = frozenset({"python"})


class KindStrategy:
    """`fits` by candidate kind, path and language, shared by the strategies."""

    name: str
    kinds: frozenset[str]
    languages: frozenset[str] = PYTHON_ONLY

    def fits(self, candidate: Candidate) -> bool:
        lang = language_of(candidate.path)
        return candidate.kind in self.kinds and lang.name in self.languages and not lang.is_test_path(candidate.path)


def language_of(rel: str) -> Language:
    """A file's language; Python for a name no language claims (as every file was before)."""
    return for_path(rel) or for_path(".py")


def syntax_error(rel: str, text: str) -> bool:
    lang = for_path(rel)
    if lang is None or lang.name == "python":
        return has_syntax_error(text.encode())
    return lang.has_syntax_error(text.encode(), rel)


def passes(check: Check, edits: Edits) -> tuple[bool, str]:
    """Run the caller's check on cumulative edits after verifying every edited file parses."""
    for path, text in sorted(edits.items()):
        if text is not None and syntax_error(path, text):
            return False, f"edit left a syntax error in {path}"
    verdict = check(dict(edits))
    if verdict is True:
        return True, ""
    return False, verdict if isinstance(verdict, str) and verdict else "check failed"


def deletion_id(repo: str, strategy: str, target: str, keep_docstrings: bool) -> str:
    """Deterministic id from what determines the output. The seed is not part of it: no current
    strategy draws from the rng, so the same target and options give the same deletion."""
    key = f"{target}\0{strategy}\0docstrings={int(keep_docstrings)}"
    return f"{repo}__{strategy}__{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def make_deletion(
    candidate: Candidate,
    strategy: str,
    *,
    keep_docstrings: bool,
    deleted: list[str],
    files: Edits,
    removed: list[str],
    stubbed: list[str] | None = None,
    rolled_back: list[str] | None = None,
    wiring: list[str] | None = None,
) -> Deletion:
    target = f"{candidate.path}::{candidate.qualname}"
    return Deletion(
        deletion_id=deletion_id(candidate.repo, strategy, target, keep_docstrings),
        repo=candidate.repo,
        strategy=strategy,
        target=target,
        deleted_symbols=list(deleted),
        files=dict(sorted(files.items())),
        removed=list(removed),
        keep_docstrings=keep_docstrings,
        stubbed_symbols=list(stubbed or []),
        rolled_back=list(rolled_back or []),
        wiring=list(wiring or []),
    )


@dataclass
class Tree:
    """Lazy, cached, read-only view of the original repository (bytes, parse trees, symbols).

    `Tree.open(root)` reuses the view of an unchanged tree across strategy calls (the feature
    strategy's name index costs a walk of every file), keyed by every source file's path, size
    and mtime, so a tree edited or replaced at the same path is read afresh. Its files are those
    of the tree's language (featdel.lang.detect_language)."""

    root: Path
    language: Language = field(default_factory=lambda: for_path(".py"))
    _bytes: dict[str, bytes] = field(default_factory=dict)
    _trees: dict[str, object] = field(default_factory=dict)
    _symbols: dict[str, list[Symbol]] = field(default_factory=dict)
    _paths: list[str] | None = None
    _memo: dict[str, object] = field(default_factory=dict)

    @classmethod
    def open(cls, root: Path) -> Tree:
        root = Path(root).resolve()
        lang = detect_language(root)
        files = lang.source_files(root)
        key = (str(root), lang.name, tuple((p.as_posix(), p.stat().st_size, p.stat().st_mtime_ns) for p in files))
        for i, (k, tree) in enumerate(_OPEN):
            if k == key:
                _OPEN.insert(0, _OPEN.pop(i))
                return tree
        tree = cls(root, lang, _paths=[p.relative_to(root).as_posix() for p in files])
        _OPEN.insert(0, (key, tree))
        del _OPEN[4:]
        return tree

    def memo(self, key: str, compute):
        """Derived data computed once per tree (indexes shared by candidates)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def paths(self) -> list[str]:
        """Every file of the tree's language, relative POSIX paths, sorted."""
        if self._paths is None:
            self._paths = [p.relative_to(self.root).as_posix() for p in self.language.source_files(self.root)]
        return self._paths

    def source_paths(self) -> list[str]:
        return [p for p in self.paths() if not self.language.is_test_path(p)]

    def read(self, rel: str) -> bytes:
        if rel not in self._bytes:
            path = self.root / rel
            if not path.is_file():
                raise NotApplicable(f"{rel} does not exist")
            data = path.read_bytes()
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise NotApplicable(f"{rel} is not UTF-8") from exc
            self._bytes[rel] = data
        return self._bytes[rel]

    def tree(self, rel: str):
        if rel not in self._trees:
            self._trees[rel] = language_of(rel).parse(self.read(rel), rel)
        return self._trees[rel]

    def symbols(self, rel: str) -> list[Symbol]:
        if rel not in self._symbols:
            self._symbols[rel] = language_of(rel).symbols(self.read(rel), rel)
        return self._symbols[rel]

    def find(self, rel: str, qualname: str) -> list[Symbol]:
        """Every definition of `qualname` in `rel` (a property's getter and setter, overloads)."""
        return [s for s in self.symbols(rel) if s.qualname == qualname]

    def within(self, rel: str, outer: Symbol) -> list[Symbol]:
        """`outer` and every symbol nested in it."""
        return [s for s in self.symbols(rel) if outer.start_byte <= s.start_byte and s.end_byte <= outer.end_byte]


_OPEN: list[tuple[object, Tree]] = []  # most recently used first; a few trees at most


def target_symbols(tree: Tree, candidate: Candidate, kinds: frozenset[str],
                   languages: frozenset[str] = PYTHON_ONLY) -> list[Symbol]:
    """The candidate's definitions, after checking the kind and language fit and the file is
    source code."""
    if candidate.kind not in kinds:
        raise NotApplicable(f"kind {candidate.kind!r} is not one of {sorted(kinds)}")
    lang = language_of(candidate.path)
    if lang.name not in languages:
        raise NotApplicable(f"{candidate.path} is {lang.name}, which this strategy does not edit")
    if lang.is_test_path(candidate.path):
        raise NotApplicable(f"{candidate.path} is test code")
    found = tree.find(candidate.path, candidate.qualname)
    if not found:
        raise NotApplicable(f"{candidate.path}::{candidate.qualname} not found")
    if any(s.kind != candidate.kind for s in found):
        raise NotApplicable(f"{candidate.qualname} is a {found[0].kind}, not a {candidate.kind}")
    return found


def decode(data: bytes) -> str:
    return data.decode("utf-8")

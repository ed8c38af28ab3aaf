"""The `function`, `method` and `class` strategies: remove the definition outright.

In: the original tree and a candidate of the strategy's kind. Out: one edited file with every
definition of the qualname gone (decorators, attached comments and a property's setter too), a
class emptied of its last statement keeping `pass`, blank lines collapsed. Other code may still
refer to the name: the caller's check decides, and a removal that breaks import or collection is
retried with the name's wiring removed too (featdel.deletion.wiring: re-exports, `__all__`,
aliases, registrations), and when that fails as well it is rolled back (FeatureBench's rule) and
reported as `RolledBack`. Docstrings go with the definition,
so the recorded `keep_docstrings` is False whatever was asked.

Other languages remove through their `edits` (featdel.lang.base.Edits), and their wiring is
taken out with `wired_removal`: for JavaScript, ES and CommonJS exports and re-exports through
barrels (featdel.lang.javascript.exports).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from featdel.code.spans import Symbol
from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import (
    Check,
    KindStrategy,
    NotApplicable,
    RolledBack,
    Tree,
    decode,
    language_of,
    make_deletion,
    passes,
    target_symbols,
)
from featdel.deletion.splice import Lines, Splice, apply, removal, snippet, statement_node
from featdel.deletion.wiring import Plan, find
from featdel.lang.base import EditRefused


@dataclass(frozen=True, slots=True)
class Cut:
    """The removal of some definitions from one file, before it is applied."""

    path: str
    splices: list[Splice]
    deleted: list[str]  # "path::qualname", nested symbols included
    removed: list[str]  # the original text of each removed definition


def cut(tree: Tree, path: str, found: list[Symbol]) -> Cut:
    deleted: list[str] = []
    for s in found:
        for inner in tree.within(path, s):
            name = f"{path}::{inner.qualname}"
            if name not in deleted:
                deleted.append(name)
    source, lang = tree.read(path), language_of(path)
    if lang.edits is not None:
        try:
            edit = lang.edits.remove(source, found)
        except EditRefused as exc:
            raise NotApplicable(str(exc)) from None
        return Cut(path, edit.splices, deleted, edit.removed)
    ts = tree.tree(path)
    lines = Lines(source, ts)
    outers = [statement_node(ts, s) for s in found]
    return Cut(path, removal(source, ts, outers), deleted, [snippet(lines, o) for o in outers])


class RemovalStrategy(KindStrategy):
    languages = frozenset({"python", "javascript"})

    def __init__(self, name: str, kind: str):
        self.name = name
        self.kinds = frozenset({kind})

    def apply(
        self,
        root: Path,
        candidate: Candidate,
        *,
        check: Check,
        keep_docstrings: bool,
        rng: random.Random,
    ) -> Deletion:
        tree = Tree.open(root)
        found = target_symbols(tree, candidate, self.kinds, self.languages)
        c = cut(tree, candidate.path, found)
        edits = {candidate.path: decode(apply(tree.read(candidate.path), c.splices))}
        ok, reason = passes(check, edits)
        wired: list[str] = []
        lang = language_of(candidate.path)
        if not ok and lang.edits is not None:  # its exports and re-exports go too
            try:
                wiring = lang.edits.wired_removal(tree, candidate.path, found)
            except EditRefused as exc:
                wiring, reason = None, f"{reason}; its wiring: {exc}"
            if wiring:
                ok, why = passes(check, wiring.files)
                reason, wired = (reason, wiring.labels) if ok else (f"{reason}; with its wiring too: {why}", [])
                edits = wiring.files if ok else edits
        elif not ok:  # a re-export or registration keeps it wired in: take that out too
            cls = candidate.qualname.rpartition(".")[0] if candidate.kind == "method" else None
            wiring = find(tree, candidate.path, found[0].name, cls)
            if wiring:
                def change(p: Plan) -> None:
                    p.file(candidate.path).nodes.extend(statement_node(tree.tree(candidate.path), s) for s in found)
                    wiring.add_to(p)

                _, edits = Plan(tree).trial(change)
                ok, why = passes(check, edits)
                reason, wired = (reason, wiring.labels) if ok else (f"{reason}; with its wiring too: {why}", [])
        if not ok:
            raise RolledBack(f"removing {candidate.qualname} fails the check: {reason}")
        return make_deletion(
            candidate,
            self.name,
            keep_docstrings=False,
            deleted=c.deleted,
            files=edits,
            removed=c.removed,
            wiring=wired,
        )

"""The `combine` strategy: 2-4 verified deletions of one repository, disjoint, joined into one task.

In: the original tree and verified `Deletion`s of one repository. Out: `Deletion`s with strategy
`combine`, each the union of its parts (edits, deleted symbols, wiring, removed snippets; `parts`
names them), which the verify stage then checks again as a whole (F2P = whatever fails then,
normally the union of the parts' F2P). Parts are disjoint when no symbol is deleted by two of them
and, in a file both edit, their changed line ranges are at least one line apart; the edits of such
a file are merged line by line against the original. Unlike the other strategies it starts from
verified deletions rather than a candidate, so it runs after a first verify pass (see
`featdel.pipeline.delete.combine_all`); in the registry it fits no candidate.
"""

from __future__ import annotations

import difflib
import hashlib
import random
import re
from pathlib import Path

from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import NotApplicable


def _rows(text: str) -> list[str]:
    return [row for row in re.split(r"(?<=\n)", text) if row]


def _hunks(old: list[str], new: list[str]) -> list[tuple[int, int, list[str]]]:
    """(first original row, end row, replacement rows) of every change."""
    ops = difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes()
    return [(i1, i2, new[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _apart(a: list[tuple[int, int, list[str]]], b: list[tuple[int, int, list[str]]]) -> bool:
    """At least one untouched original row between any hunk of `a` and any of `b` (ends are
    exclusive)."""
    return all(e1 < s2 or e2 < s1 for s1, e1, _ in a for s2, e2, _ in b)


class Combiner:
    """Hunks of each part against the original, computed once."""

    def __init__(self, original: Path):
        self.original = Path(original)
        self._old: dict[str, list[str]] = {}
        self._hunks: dict[tuple[str, str], list] = {}

    def old(self, rel: str) -> list[str]:
        if rel not in self._old:
            self._old[rel] = _rows((self.original / rel).read_text(encoding="utf-8"))
        return self._old[rel]

    def hunks(self, d: Deletion, rel: str) -> list:
        key = (d.deletion_id, rel)
        if key not in self._hunks:
            self._hunks[key] = _hunks(self.old(rel), _rows(d.files[rel] or ""))
        return self._hunks[key]

    def disjoint(self, a: Deletion, b: Deletion) -> bool:
        if set(a.deleted_symbols) & set(b.deleted_symbols):
            return False
        for rel in set(a.files) & set(b.files):
            if a.files[rel] is None or b.files[rel] is None or not _apart(self.hunks(a, rel), self.hunks(b, rel)):
                return False
        return True

    def join(self, parts: list[Deletion]) -> Deletion:
        files: dict[str, str | None] = {}
        for rel in sorted({rel for d in parts for rel in d.files}):
            editing = [d for d in parts if rel in d.files]
            if len(editing) == 1:
                files[rel] = editing[0].files[rel]
                continue
            rows = list(self.old(rel))
            for start, end, new in sorted((h for d in editing for h in self.hunks(d, rel)), reverse=True):
                rows[start:end] = new
            files[rel] = "".join(rows)
        ids = sorted(d.deletion_id for d in parts)
        repo = parts[0].repo
        digest = hashlib.sha1("\0".join(ids).encode()).hexdigest()[:8]
        return Deletion(
            deletion_id=f"{repo}__combine__{digest}",
            repo=repo,
            strategy="combine",
            target=" + ".join(d.target for d in parts),
            deleted_symbols=[s for d in parts for s in d.deleted_symbols],
            files=files,
            removed=[r for d in parts for r in d.removed],
            keep_docstrings=all(d.keep_docstrings for d in parts),
            seed=parts[0].seed,
            stubbed_symbols=[s for d in parts for s in d.stubbed_symbols],
            rolled_back=[s for d in parts for s in d.rolled_back],
            wiring=[w for d in parts for w in d.wiring],
            parts=ids,
        )


def combine(original: Path, verified: list[Deletion], rng: random.Random, *, max_tasks: int = 3,
            sizes: tuple[int, ...] = (2, 3, 4)) -> list[Deletion]:
    """Up to `max_tasks` combined deletions from `verified` (one repository), each part used once.
    Groups are drawn greedily in a seeded order: a deletion joins a group when it is disjoint
    from every member; a group is closed at its drawn size or when nothing else fits."""
    if len({d.repo for d in verified}) > 1:
        raise ValueError("combine joins deletions of one repository")
    c = Combiner(original)
    pool = [d for d in sorted(verified, key=lambda d: d.deletion_id) if d.strategy != "combine"]
    rng.shuffle(pool)
    out: list[Deletion] = []
    while len(out) < max_tasks and len(pool) >= 2:
        want = rng.choice(sizes)
        group = [pool.pop(0)]
        for d in list(pool):
            if len(group) >= want:
                break
            if all(c.disjoint(d, g) for g in group):
                group.append(d)
                pool.remove(d)
        if len(group) >= 2:
            out.append(c.join(sorted(group, key=lambda d: d.deletion_id)))
    return out


class CombineStrategy:
    """The registry entry: `combine` is a known strategy name that fits no single candidate."""

    name = "combine"
    kinds: frozenset[str] = frozenset()

    def fits(self, candidate: Candidate) -> bool:
        return False

    def apply(self, root: Path, candidate: Candidate, *, check, keep_docstrings: bool, rng) -> Deletion:
        raise NotApplicable("combine joins verified deletions, not a candidate: it runs after verify")

"""Leak audit: does any copy of the deleted code survive where a learner could reach it?

In: the deleted snippets, the original tree, the start state, and the directories a learner's
environment exposes (the virtualenv). Out: None, or the first hit as "path: line". Needles are
the distinctive lines of the deleted code: long enough to mean something, occurring in the
original tree no more often than in the deleted code itself, and not kept on purpose (the
signature and docstring a `body` stub keeps). Every file is searched as bytes, text and binary
alike, and git's loose objects are decompressed first, so history and caches are covered too.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from pathlib import Path

MIN_NEEDLE = 12


def _lines(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines()]


def _meaningful(line: str) -> bool:
    return len(line) >= MIN_NEEDLE and not line.startswith("#") and any(c.isalnum() for c in line)


def declared(original: Path, deleted_symbols: list[str], keep_docstrings: bool, *, symbols_of=None) -> set[str]:
    """Lines the task gives the learner on purpose: signatures, and docstrings when kept.
    `symbols_of(source, path)` reads a file's symbols (default: Python's)."""
    from featdel.code.spans import symbols

    symbols = symbols_of or symbols

    lines: set[str] = set()
    by_file: dict[str, set[str]] = {}
    for ref in deleted_symbols:
        path, _, qualname = ref.partition("::")
        by_file.setdefault(path, set()).add(qualname)
    for path, names in by_file.items():
        source = (original / path).read_bytes()
        for sym in symbols(source, path):
            if sym.qualname in names:
                lines.update(_lines(source[sym.start_byte : sym.body_start_byte].decode(errors="replace")))
                if keep_docstrings and sym.docstring:
                    lines.update(_lines(sym.docstring))
    return lines


def needles(removed: list[str], original: Path, kept_files: dict[str, str | None],
            allowed: set[str] = frozenset()) -> list[str]:
    """Distinctive lines of the deleted code (see the module docstring)."""
    in_removed = Counter(ln for snippet in removed for ln in _lines(snippet) if _meaningful(ln))
    in_original: Counter[str] = Counter()
    texts = []
    for path in original.rglob("*"):
        if path.is_file():
            texts.append(path.read_text(errors="replace"))
            in_original.update(_lines(texts[-1]))
    kept = {ln for text in kept_files.values() if text for ln in _lines(text)}
    found = [ln for ln, n in in_removed.items() if in_original[ln] <= n and ln not in kept | allowed]
    # `audit` also looks for a long needle inside longer lines, so it must be as rare there: the
    # deleted `if name.startswith(incomplete)` is no copy of itself in a kept
    # `if name.startswith(incomplete):`, which the start state holds on purpose.
    def count(ln: str, where: list[str]) -> int:
        return sum(text.count(ln) for text in where)

    return sorted(ln for ln in found if len(ln) < LONG_NEEDLE or count(ln, texts) <= count(ln, removed))


LONG_NEEDLE = 24  # long enough to search for inside binary data and within other lines


def audit(found_needles: list[str], roots: list[Path], extra_texts: dict[str, str] | None = None,
          *, third_party: list[Path] = ()) -> str | None:
    """The first place a needle occurs, as "path: needle", or None when clean. Text is matched
    line by line (a needle must be a whole line, as in the deleted code); binary data (bytecode,
    caches) is searched for the long needles anywhere, `extra_texts` (prose such as a problem
    statement) for every needle anywhere. In `third_party` trees (an environment's
    installed packages) a file must hold two distinct needles (one when there is only one):
    a single generic line such as `return re.sub(` turns up in unrelated libraries."""
    if not found_needles:
        return None
    alternation = b"|".join(re.escape(n.encode()) for n in sorted(found_needles, key=len, reverse=True))
    as_line = re.compile(rb"(?m)^[ \t]*(?:" + alternation + rb")[ \t]*\r?$")
    longs = [n for n in found_needles if len(n) >= LONG_NEEDLE]
    anywhere = re.compile(b"|".join(re.escape(n.encode()) for n in longs)) if longs else None
    inline = re.compile(alternation)  # a statement is prose: a short line quoted inside a sentence counts too
    for label, text in (extra_texts or {}).items():
        hit = _search(text.encode(), as_line, inline)
        if hit:
            return f"{label}: {hit}"
    need = min(2, len(found_needles))
    for root, min_hits in [(r, 1) for r in roots] + [(r, need) for r in third_party]:
        for path in sorted(root.rglob("*")):
            if not path.is_file() or path.is_symlink():
                continue
            data = path.read_bytes()
            if path.parent.parent.name == "objects" and len(path.parent.name) == 2:  # a loose git object
                try:
                    data = zlib.decompress(data).split(b"\0", 1)[-1]  # drop "blob <size>\0"
                except zlib.error:
                    pass  # a pack or index: searched as stored
            hits = _search(data, as_line, anywhere, min_hits)
            if hits:
                return f"{path}: {hits}"
    return None


def _search(data: bytes, as_line: re.Pattern, anywhere: re.Pattern | None, min_hits: int = 1) -> str | None:
    found: set[str] = set()
    if b"\0" not in data[:8192]:
        found.update(m.group().decode(errors="replace").strip() for m in as_line.finditer(data))
    if anywhere is not None and len(found) < min_hits:
        found.update(m.group().decode(errors="replace") for m in anywhere.finditer(data))
    return " | ".join(sorted(found)[:3]) if len(found) >= min_hits else None

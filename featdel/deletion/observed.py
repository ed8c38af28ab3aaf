"""What an arbitrary edit of the original tree deleted, read back from the edit itself.

In: the original tree (read-only `Tree`) and edits (path -> new text, None for a removed file),
as a model or any other free-form editor produced them. Out: an `Observed` record: the
definitions that are gone (nested ones included), those whose body became a stub (`pass`, `...`,
`raise NotImplementedError`, a docstring alone), the original text of each (for the leak audit
and the similarity gate), and the names a file no longer binds (re-exports, aliases: wiring).

The rule-based strategies know what they cut; a free-form edit does not say, so this is how the
`agent` strategy fills the same `Deletion` fields and goes through the same verification. A
definition that merely changed (a caller that lost a line) is neither deleted nor stubbed: its
kept lines stay out of the leak audit's needles anyway, and the statement must not call it gone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from featdel.code.gone import deleted_names
from featdel.code.imports import module_name
from featdel.code.spans import Symbol, has_syntax_error, is_test_path, symbols
from featdel.deletion.base import Edits, Tree
from featdel.deletion.splice import Lines, snippet, statement_node

_STUBS = ("pass", "...", "raise NotImplementedError", "raise NotImplementedError()")


@dataclass(frozen=True, kw_only=True, slots=True)
class Observed:
    deleted: list[str] = field(default_factory=list)  # "path::qualname", stubbed ones included
    stubbed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)  # original text of what went
    wiring: list[str] = field(default_factory=list)  # "path::name (binding)"

    def summary(self) -> str:
        if not self.deleted:
            return "no function, method or class is deleted or stubbed yet"
        stub = set(self.stubbed)
        return "deleted: " + ", ".join(d + (" (stubbed)" if d in stub else "") for d in self.deleted)


def _body(source: bytes, sym: Symbol) -> str:
    """The statements of a definition's body after its docstring, one string."""
    text = source[sym.body_start_byte : sym.end_byte].decode("utf-8", "replace")
    if sym.docstring and text.startswith(sym.docstring):
        text = text[len(sym.docstring):]
    return " ".join(text.split())


def is_stub(source: bytes, sym: Symbol) -> bool:
    return sym.kind != "class" and _body(source, sym) in ("", *_STUBS)


def observe(tree: Tree, edits: Edits) -> Observed:
    """See the module docstring. Test files and files that do not parse are left out: the
    caller refuses the first and the check rejects the second."""
    deleted, stubbed, removed, wiring = [], [], [], []
    paths = set(tree.paths())
    for rel, text in sorted(edits.items()):
        if is_test_path(rel) or not rel.endswith(".py") or not (tree.root / rel).is_file():
            continue
        before = tree.symbols(rel)
        source = tree.read(rel)
        if text is None:
            deleted += [f"{rel}::{s.qualname}" for s in before]
            removed.append(source.decode("utf-8"))
            continue
        new = text.encode()
        if has_syntax_error(new):
            continue
        after = {s.qualname: s for s in symbols(new, rel)}
        gone = [s for s in before if s.qualname not in after]
        gone_names = {s.qualname for s in gone}
        lines = Lines(source, tree.tree(rel))
        for s in gone:
            deleted.append(f"{rel}::{s.qualname}")
            if s.qualname.rpartition(".")[0] not in gone_names:  # the outermost one carries the text
                removed.append(snippet(lines, statement_node(tree.tree(rel), s)))
        for s in before:
            now = after.get(s.qualname)
            if now is not None and is_stub(new, now) and not is_stub(source, s):
                ref = f"{rel}::{s.qualname}"
                deleted.append(ref)
                stubbed.append(ref)
                removed.append(source[s.body_start_byte : s.end_byte].decode("utf-8"))
        unbound = deleted_names(tree.read, {rel: text}, lambda r: module_name(r, paths))
        wiring += [f"{rel}::{n} (binding)" for n in sorted(unbound - {q.rpartition(".")[2] for q in gone_names})]
    return Observed(deleted=list(dict.fromkeys(deleted)), stubbed=stubbed, removed=removed, wiring=wiring)

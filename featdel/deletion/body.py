"""The `body` strategy: a function or method keeps its signature (and, by option, its docstring);
its body becomes `raise NotImplementedError`.

In: the original tree and a function/method candidate. Out: one edited file. Every definition of
the qualname in the file is stubbed (a property's getter and setter, `typing.overload` variants),
since stubbing only one would leave the implementation in the other. commit0 stubs this way; the
import check still runs, because a stubbed decorator or a function called at import time breaks
the package.

Layouts handled: `def f(): return 1` (the stub stays on the header line), multi-line headers,
decorators, `async def`, a body that is only a docstring, comments between the header and the
body (dropped: they describe the implementation). A body that already is `pass`, `...` or
`raise NotImplementedError` is not applicable: stubbing it would delete nothing.

Other languages stub through their `edits` (featdel.lang.base.Edits): JavaScript's body becomes
`throw new Error("not implemented")`, its signature and TypeScript types kept.
"""

from __future__ import annotations

import random
from pathlib import Path

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
from featdel.deletion.splice import Lines, Splice, apply, owned_rows, statement_node
from featdel.lang.base import EditRefused

STUB = b"raise NotImplementedError"


def is_docstring(node) -> bool:
    return (
        node.type == "expression_statement"
        and len(node.named_children) == 1
        and node.named_children[0].type in ("string", "concatenated_string")
    )


def _is_trivial(stmts: list) -> bool:
    if len(stmts) != 1:
        return False
    node = stmts[0]
    if node.type == "pass_statement":
        return True
    if node.type == "expression_statement" and node.text.strip() == b"...":
        return True
    return node.type == "raise_statement" and node.text.split(b"(")[0].split() == [b"raise", b"NotImplementedError"]


def stub_splices(lines: Lines, outers: list, *, keep_docstring: bool) -> list[Splice]:
    """Stubs for every definition of one qualname; definitions already stubs (the `...` bodies
    of `typing.overload` variants) are left alone, and if all are, nothing fits."""
    out = []
    for outer in outers:
        try:
            out.append(stub_splice(lines, outer, keep_docstring=keep_docstring))
        except AlreadyStub:
            continue
    if not out:
        raise NotApplicable("the body is already a stub")
    return out


class AlreadyStub(NotApplicable):
    """The body is `pass`, `...` or `raise NotImplementedError` already."""


def function_node(outer):
    return outer if outer.type == "function_definition" else outer.child_by_field_name("definition")


def stub_splice(lines: Lines, outer, *, keep_docstring: bool) -> Splice:
    """The splice that turns one function definition's body into the stub."""
    fn = function_node(outer)
    if fn is None or fn.type != "function_definition":
        raise NotApplicable("not a function definition")
    body = fn.child_by_field_name("body")
    stmts = [c for c in body.named_children if c.type != "comment"]
    doc = stmts[0] if stmts and is_docstring(stmts[0]) else None
    rest = stmts[1:] if doc is not None else stmts
    if _is_trivial(rest):
        raise AlreadyStub("the body is already a stub")
    colon = [c for c in fn.children if c.type == ":" and c.end_byte <= body.start_byte][-1]
    _, last = owned_rows(lines, outer)
    end = lines.content_end(last)
    inline = body.start_point[0] == colon.start_point[0]  # `def f(): return 1`
    if doc is not None and keep_docstring:
        # everything after the docstring goes; the docstring and what precedes it stay put
        return Splice(doc.end_byte, end, (b"; " if inline else lines.newline + _indent(lines, stmts)) + STUB)
    if inline:
        return Splice(body.start_byte, end, STUB)
    return Splice(lines.content_end(colon.start_point[0]), end, lines.newline + _indent(lines, stmts) + STUB)


def _indent(lines: Lines, stmts: list) -> bytes:
    return lines.indent(stmts[0].start_point[0])


def replaced(source: bytes, splice: Splice) -> str:
    """The original text a stub replaced: the body lines (and the docstring when stripped)."""
    text = source[splice.start : splice.end].decode("utf-8").lstrip("\r\n")
    return text[1:].lstrip(" \t") if text.startswith(";") else text


class BodyStrategy(KindStrategy):
    name = "body"
    kinds = frozenset({"function", "method"})
    languages = frozenset({"python", "javascript"})

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
        source = tree.read(candidate.path)
        lang = language_of(candidate.path)
        if lang.edits is not None:
            try:
                edit = lang.edits.stub(source, found)
            except EditRefused as exc:
                raise NotApplicable(str(exc)) from None
            splices, removed = edit.splices, edit.removed
        else:
            lines = Lines(source, tree.tree(candidate.path))
            outers = [statement_node(tree.tree(candidate.path), s) for s in found]
            splices = stub_splices(lines, outers, keep_docstring=keep_docstrings)
            removed = [replaced(source, s) for s in splices]
        edits = {candidate.path: decode(apply(source, splices))}
        ok, reason = passes(check, edits)
        if not ok:
            raise RolledBack(f"stubbing {candidate.qualname} fails the check: {reason}")
        target = f"{candidate.path}::{candidate.qualname}"
        return make_deletion(
            candidate,
            self.name,
            keep_docstrings=keep_docstrings,
            deleted=[target],
            files=edits,
            removed=[r for r in removed if r.strip()],
            stubbed=[target],
        )

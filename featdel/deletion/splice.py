"""Byte-exact edits of Python source: line tables, statement removal, blank-line cleanup.

In: a file's bytes, its tree-sitter tree and the statement nodes to remove. Out: `Splice`s (byte
range -> replacement) that, applied together, leave valid Python: a block whose every statement
goes gets `pass`, comments attached above a definition (and deeper-indented comments trailing it)
go with it, and the blank lines around the cut collapse to the larger of the two runs. All edits
are computed on the original bytes and applied in one pass, so several removals in one file
never see each other's offsets.
"""

from __future__ import annotations

from featdel.code.spans import Symbol
from featdel.deletion.base import NotApplicable
from featdel.lang.base import Splice, apply  # one splice record for every language's edits

DEFINITIONS = ("decorated_definition", "function_definition", "class_definition")


class Lines:
    """Line table of one source: starts, ends, indentation, blank and comment lines."""

    def __init__(self, source: bytes, tree=None):
        self.source = source
        self.starts = [0]
        for i, ch in enumerate(source):
            if ch == 10:
                self.starts.append(i + 1)
        if self.starts[-1] == len(source) and len(self.starts) > 1:
            self.starts.pop()  # no empty line after a final newline
        self.newline = b"\r\n" if b"\r\n" in source else b"\n"
        self.comments: set[int] = set()
        if tree is not None:
            self._find_comments(tree.root_node)

    def _find_comments(self, node) -> None:
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type == "comment":
                row = n.start_point[0]
                if self.text(row)[: n.start_point[1]].strip() == b"":
                    self.comments.add(row)
            stack.extend(n.children)

    def __len__(self) -> int:
        return len(self.starts)

    def start(self, row: int) -> int:
        return self.starts[row] if row < len(self.starts) else len(self.source)

    def end(self, row: int) -> int:
        """Byte after the line, its newline included."""
        return self.start(row + 1)

    def text(self, row: int) -> bytes:
        return self.source[self.start(row) : self.end(row)]

    def content_end(self, row: int) -> int:
        """Byte where the line's newline starts."""
        return self.start(row) + len(self.text(row).rstrip(b"\r\n"))

    def blank(self, row: int) -> bool:
        return self.text(row).strip() == b""

    def indent(self, row: int) -> bytes:
        line = self.text(row)
        return line[: len(line) - len(line.lstrip(b" \t"))]


def statement_node(tree, sym: Symbol):
    """The outermost node of a symbol's definition (the decorated_definition when decorated)."""
    node = tree.root_node.descendant_for_byte_range(sym.start_byte, sym.end_byte)
    while node is not None and node.type not in DEFINITIONS:
        node = node.parent
    if node is None or (node.start_byte, node.end_byte) != (sym.start_byte, sym.end_byte):
        raise NotApplicable(f"cannot locate {sym.path}::{sym.qualname} in the tree")
    return node


def owned_rows(lines: Lines, node) -> tuple[int, int]:
    """Rows a statement owns: its own, comments directly above at its indentation (unless the
    run reaches the file's first line: a header or licence) and deeper comments trailing it."""
    first, last = node.start_point[0], node.end_point[0]
    if lines.text(first)[: node.start_point[1]].strip():
        raise NotApplicable(f"statement at line {first + 1} shares its line")
    tail = lines.source[node.end_byte : lines.content_end(last)].strip()
    if tail and not tail.startswith(b"#"):
        raise NotApplicable(f"statement at line {last + 1} shares its line")
    indent = lines.indent(first)
    top = first
    while top - 1 >= 0 and top - 1 in lines.comments and lines.indent(top - 1) == indent:
        top -= 1
    if top == 0 and top != first:
        top = first
    row, end = last + 1, last
    while row < len(lines):
        if lines.blank(row):
            row += 1
        elif row in lines.comments and len(lines.indent(row)) > len(indent):
            end, row = row, row + 1
        else:
            break
    return top, end


def snippet(lines: Lines, node) -> str:
    top, end = owned_rows(lines, node)
    return lines.source[lines.start(top) : lines.end(end)].decode("utf-8")


def _statements(block) -> list:
    return [c for c in block.named_children if c.type != "comment"]


def _outermost(nodes: list) -> list:
    """Drop nodes nested inside other nodes of the list."""
    keep = []
    for n in sorted(nodes, key=lambda n: (n.start_byte, -n.end_byte)):
        if keep and n.start_byte >= keep[-1].start_byte and n.end_byte <= keep[-1].end_byte:
            continue
        keep.append(n)
    return keep


def removal(source: bytes, tree, nodes: list) -> list[Splice]:
    """Splices that remove whole statements (definitions, imports) and keep the file valid."""
    lines = Lines(source, tree)
    nodes = _outermost(nodes)
    ids = {(n.start_byte, n.end_byte) for n in nodes}
    # a block all of whose statements go must keep one: `pass` where its first one stood
    pass_rows: dict[int, bytes] = {}
    first_rows: set[int] = set()  # a block's first statement: no blank line may follow its header
    for n in nodes:
        parent = n.parent
        if parent is None or parent.type != "block":
            continue
        stmts = _statements(parent)
        if stmts[0] != n:
            continue
        top, _ = owned_rows(lines, n)
        first_rows.add(top)
        if all((s.start_byte, s.end_byte) in ids for s in stmts):
            pass_rows[top] = lines.indent(n.start_point[0]) + b"pass" + lines.newline
    ranges = sorted(owned_rows(lines, n) for n in nodes)
    merged: list[list[int]] = []
    for top, end in ranges:
        if merged and all(lines.blank(r) for r in range(merged[-1][1] + 1, top)):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([top, end])
    splices = []
    for top, end in merged:
        before = 0
        while top - before - 1 >= 0 and lines.blank(top - before - 1):
            before += 1
        after = 0
        while end + after + 1 < len(lines) and lines.blank(end + after + 1):
            after += 1
        text = pass_rows.get(top, b"")
        at_eof = end + after + 1 >= len(lines)
        at_bof = top - before == 0 or top in first_rows
        if at_eof and not text:
            start_row, end_row = top - before, end + after
        elif at_bof and not text:
            start_row, end_row = top, end + after
        else:
            start_row, end_row = top, end + min(before, after)
        start = lines.start(start_row)
        if at_eof and start_row > 0 and not text:
            start = lines.content_end(start_row - 1)  # the file keeps no trailing blank lines
            text = lines.newline
        splices.append(Splice(start, lines.end(end_row), text))
    return splices

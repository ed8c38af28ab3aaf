"""Byte-exact edits of JavaScript and TypeScript: a body stubbed, definitions removed.

In: a file's bytes and `Symbol`s of it (featdel.lang.javascript.syntax). Out: `Splice`s on the
original bytes (featdel.lang.base), so several edits of one file compose in one pass.

- The stub: a body becomes `{ throw new Error("not implemented"); }` (in TypeScript, a function
  declaration or method without a return type returns a throwing arrow's call instead, so the
  inferred return type is `never` rather than `void`), laid out as the body was
  (one line, or one statement per line at the body's indentation); an arrow's expression body
  becomes that block. Everything before the body stays, TypeScript's parameter and return types
  too: a block that only throws type-checks whatever the declared return type. A derived class's
  constructor keeps its `super(...)` call, without which TypeScript rejects the class. A body
  that is empty or only throws is a stub already.
- The stub gate's bodies: `return undefined;`, `return null;`, the first parameter, and an object
  equal to anything where JavaScript allows it: a `Proxy` whose every property is a function
  returning true, so `asymmetricMatch` makes jest's and vitest's `toEqual`, `toStrictEqual` and
  `toMatchObject` accept it against any expected value, and any truthiness check passes (`then`
  stays undefined, or `await` on it would never settle). Identity (`===`, `Object.is`,
  `assert.strictEqual`, `toBe`, chai's `equal`) cannot be faked in JavaScript. In TypeScript each
  return is cast `as any`, so a type-checking runner (ts-jest) runs the variant rather than
  rejecting it. Constructors and setters get an empty body for every label (their value is not
  the caller's); a function without a plain first parameter returns undefined for that label.
- Removal: a definition alone on its lines goes with the comments right above it (unless they
  reach the file's first line: a header or licence) and the blank lines around it collapse to
  the larger run, none left after an opening `{` or before a closing `}`; one sharing its line
  (`{ a() {}, b() {} }`) goes by bytes, with its separating comma.
"""

from __future__ import annotations

import bisect

from featdel.lang.base import AlreadyStub, Edit, EditRefused, Splice, StubBody, Symbol
from featdel.lang.javascript import syntax

THROW = 'throw new Error("not implemented");'
# TypeScript infers `void` for a function declaration or method without a return type whose body
# only throws (an arrow that only throws is `never`): callers using its value, and its overload
# signatures (TS2394), would then fail the type check. Returning the throwing arrow's call keeps
# the inferred type `never`, which fits every use.
THROW_NEVER = 'return (() => { throw new Error("not implemented"); })();'
LABELS = ("return undefined", "return null", "return first argument", "equal_anything")
# `has` too: jest's and vitest's equality look for an asymmetric matcher with `"asymmetricMatch" in
# value` before they call it, and a Proxy without the trap answers no (a red-team stub with that
# key as its own property passed `toStrictEqual` on unjs/cookie-es tasks this gate had let through)
_EQUAL = ('new Proxy({}, { get: (_, key) => (key === "then" ? undefined : () => true), '
          'has: (_, key) => key !== "then" })')


class Lines:
    """Line table of one source: starts, indentation, blank lines, comment-only lines."""

    def __init__(self, source: bytes, tree=None):
        self.source = source
        self.starts = [0] + [i + 1 for i, ch in enumerate(source) if ch == 10]
        if self.starts[-1] == len(source) and len(self.starts) > 1:
            self.starts.pop()
        self.newline = b"\r\n" if b"\r\n" in source else b"\n"
        self.comments: dict[int, int] = {}  # row of a comment that starts its line -> its first row
        if tree is not None:
            stack = [tree.root_node]
            while stack:
                n = stack.pop()
                if n.type == "comment" and not self.text(n.start_point[0])[: n.start_point[1]].strip():
                    self.comments.update((r, n.start_point[0]) for r in range(n.start_point[0], n.end_point[0] + 1))
                stack.extend(n.children)

    def __len__(self) -> int:
        return len(self.starts)

    def row(self, byte: int) -> int:
        return bisect.bisect_right(self.starts, byte) - 1

    def start(self, row: int) -> int:
        return self.starts[row] if row < len(self.starts) else len(self.source)

    def end(self, row: int) -> int:
        return self.start(row + 1)

    def text(self, row: int) -> bytes:
        return self.source[self.start(row) : self.end(row)]

    def content_end(self, row: int) -> int:
        return self.start(row) + len(self.text(row).rstrip(b"\r\n"))

    def blank(self, row: int) -> bool:
        return self.text(row).strip() == b""

    def indent(self, row: int) -> bytes:
        line = self.text(row)
        return line[: len(line) - len(line.lstrip(b" \t"))]


_CONTAINERS = ("program", "class_body", "object", "statement_block", "export_clause")


def node_of(tree, sym: Symbol):
    """The definition's node: the largest ending at `sym.end_byte` and starting at or after
    `sym.start_byte` (a TypeScript member's decorators stand before it, beside it)."""
    node = tree.root_node.descendant_for_byte_range(max(sym.end_byte - 1, 0), sym.end_byte)
    best = None
    while node is not None and node.type not in _CONTAINERS and node.start_byte >= sym.start_byte:
        if node.end_byte == sym.end_byte:
            best = node
        node = node.parent
    if best is None:
        raise EditRefused(f"cannot locate {sym.path}::{sym.qualname} in the tree")
    return best


def body_node(tree, sym: Symbol):
    """The body of a function or method symbol: a statement block, or an arrow's expression;
    None for a signature."""
    b = sym.body_start_byte
    if b >= sym.end_byte:
        return None
    node = tree.root_node.descendant_for_byte_range(b, b + 1)
    while node is not None and node.parent is not None and node.parent.start_byte == b:
        node = node.parent
    if node is None or node.start_byte != b:
        raise EditRefused(f"cannot locate the body of {sym.path}::{sym.qualname}")
    return node


def _statements(block) -> list:
    return [c for c in block.named_children if c.type != "comment"]


def _is_stub(body) -> bool:
    if body.type != "statement_block":
        return False
    stmts = _statements(body)
    return not stmts or (len(stmts) == 1 and stmts[0].type == "throw_statement")


def _kept_super(sym: Symbol, body) -> bytes | None:
    """A derived class's constructor keeps its top-level `super(...)` call."""
    if sym.kind != "method" or sym.name != "constructor" or body.type != "statement_block":
        return None
    for stmt in _statements(body):
        expr = stmt.named_children[0] if stmt.type == "expression_statement" and stmt.named_children else None
        if expr is not None and expr.type == "call_expression" and \
                (fn := expr.child_by_field_name("function")) is not None and fn.type == "super":
            return stmt.text
    return None


def _block(lines: Lines, body, statements: list[bytes]) -> bytes:
    """`{ ...statements }` laid out as `body` was: on one line, or one per line indented."""
    if body.start_point[0] == body.end_point[0] or not statements:
        return b"{ " + b" ".join(statements) + b" }" if statements else b"{}"
    base = lines.indent(body.start_point[0])
    inner = _statements(body) if body.type == "statement_block" else []
    step = b"  "
    if inner and inner[0].start_point[0] != body.start_point[0]:
        deeper = lines.indent(inner[0].start_point[0])
        if len(deeper) > len(base) and deeper.startswith(base):
            step = deeper[len(base):]
    nl = lines.newline
    return b"{" + b"".join(nl + base + step + s for s in statements) + nl + base + b"}"


def _returns(sym: Symbol) -> bool:
    """Does the caller get this body's value (not a constructor's or a setter's)?"""
    if sym.kind == "method" and sym.name == "constructor":
        return False
    return not sym.signature.replace("static ", "").startswith("set ")


def first_parameter(tree, sym: Symbol) -> str | None:
    """The first parameter's name when it is a plain one (TypeScript's `this:` left out)."""
    body = body_node(tree, sym)
    fn = body.parent if body is not None else None
    params = fn.child_by_field_name("parameters") if fn is not None else None
    if params is None:
        param = fn.child_by_field_name("parameter") if fn is not None else None  # `x => x`
        return param.text.decode() if param is not None and param.type == "identifier" else None
    for p in params.named_children:
        if p.type == "comment":
            continue
        if p.type in ("required_parameter", "optional_parameter"):
            p = p.child_by_field_name("pattern")
        if p is None or p.type == "this":
            continue
        return p.text.decode() if p.type == "identifier" else None
    return None


def _throwing(sym: Symbol, body) -> bytes:
    """The statement that stubs `body`: THROW, or THROW_NEVER where TypeScript would infer void."""
    fn = body.parent
    if (syntax.is_typescript(sym.path) and _returns(sym) and fn is not None
            and fn.type in ("function_declaration", "method_definition") and fn.child_by_field_name("return_type") is None
            and not any(c.type in ("async", "*", "get") for c in fn.children)):
        return THROW_NEVER.encode()
    return THROW.encode()


def stub_body(symbol: Symbol, source: bytes) -> str:
    """The body `symbol` gets from the `body` strategy: a block that throws."""
    tree = syntax.parse(source, symbol.path)
    body = body_node(tree, symbol)
    if body is None:
        raise EditRefused(f"{symbol.qualname} has no body")
    return _body_text(symbol, source, [_throwing(symbol, body)], tree).decode()


def stub_variants(symbol: Symbol, source: bytes) -> list[StubBody]:
    """The stub gate's bodies for one function or method (see the module docstring)."""
    tree = syntax.parse(source, symbol.path)
    cast = " as any" if syntax.is_typescript(symbol.path) else ""
    out = []
    for label in LABELS:
        if not _returns(symbol):
            statements: list[str] = []
        elif label == "return first argument":
            arg = first_parameter(tree, symbol) or "undefined"  # no plain parameter: nothing to return
            statements = [f"return {arg}{cast};"]
        elif label == "equal_anything":
            statements = [f"return {_EQUAL}{cast};"]
        else:
            statements = [f"{label}{cast};"]
        text = _body_text(symbol, source, [s.encode() for s in statements], tree=tree).decode()
        out.append(StubBody(label=label, text=text))
    return out


def _body_text(symbol: Symbol, source: bytes, statements: list[bytes], tree=None) -> bytes:
    tree = tree or syntax.parse(source, symbol.path)
    body = body_node(tree, symbol)
    if body is None:
        raise EditRefused(f"{symbol.qualname} has no body")
    kept = _kept_super(symbol, body)
    return _block(Lines(source), body, ([kept] if kept else []) + statements)


def body_splice(symbol: Symbol, source: bytes, text: str) -> Splice:
    """The splice putting `text` in place of the body of `symbol`."""
    body = body_node(syntax.parse(source, symbol.path), symbol)
    if body is None:
        raise EditRefused(f"{symbol.qualname} has no body")
    return Splice(body.start_byte, body.end_byte, text.encode())


def stub(source: bytes, found: list[Symbol]) -> Edit:
    """Every definition of `found` with a body gets the throwing one; signatures stay as they are."""
    tree = syntax.parse(source, found[0].path)
    splices, removed = [], []
    for sym in found:
        body = body_node(tree, sym)
        if body is None or _is_stub(body):
            continue
        splices.append(Splice(body.start_byte, body.end_byte, _body_text(sym, source, [_throwing(sym, body)], tree)))
        removed.append(body.text.decode())
    if not splices:
        raise AlreadyStub("the body is already a stub")
    return Edit(splices=splices, removed=removed)


def remove(source: bytes, found: list[Symbol]) -> Edit:
    """The definitions of `found` removed whole (see the module docstring)."""
    tree = syntax.parse(source, found[0].path)
    lines = Lines(source, tree)
    ranges = [(s.start_byte, node_of(tree, s)) for s in found]
    return Edit(splices=removal(lines, ranges), removed=[snippet(lines, start, node) for start, node in ranges])


def _trailing(lines: Lines, node) -> int:
    """The end of `node` with a `;` or `,` that follows it on its line (a class field's `;`, an
    object member's comma)."""
    rest = lines.source[node.end_byte : lines.content_end(node.end_point[0])]
    stripped = rest.lstrip(b" \t")
    if stripped[:1] in (b";", b","):
        return node.end_byte + len(rest) - len(stripped) + 1
    return node.end_byte


def _alone(lines: Lines, start: int, node) -> bool:
    """Does the element own its lines (only a comment may follow it)?"""
    row = lines.row(start)
    col = start - lines.start(row)
    if lines.text(row)[:col].strip():
        return False
    tail = lines.source[_trailing(lines, node) : lines.content_end(node.end_point[0])].strip()
    return not tail or tail.startswith((b"//", b"/*"))


def owned_rows(lines: Lines, start: int, node) -> tuple[int, int]:
    """Rows a definition owns: its own and the comments directly above it at its indentation."""
    first, last = lines.row(start), node.end_point[0]
    indent = lines.indent(first)
    top = first
    while top - 1 >= 0 and top - 1 in lines.comments and lines.indent(lines.comments[top - 1]) == indent:
        top = lines.comments[top - 1]
    if top == 0 and top != first:
        top = first  # a comment run from the first line is the file's header or licence
    return top, last


def snippet(lines: Lines, start: int, node) -> str:
    if not _alone(lines, start, node):
        return lines.source[start : node.end_byte].decode("utf-8")
    top, end = owned_rows(lines, start, node)
    return lines.source[lines.start(top) : lines.end(end)].decode("utf-8")


def removal(lines: Lines, ranges: list[tuple[int, object]]) -> list[Splice]:
    """Splices removing each (start byte, node): whole rows where it owns them, else its bytes."""
    row_ranges, splices = [], []
    for start, node in sorted(ranges, key=lambda r: (r[0], -r[1].end_byte)):
        if any(s <= start and node.end_byte <= n.end_byte for s, n in ranges if (s, n.end_byte) != (start, node.end_byte)):
            continue  # inside another removed element
        if _alone(lines, start, node):
            row_ranges.append(owned_rows(lines, start, node))
        else:
            splices.append(_inline(lines, start, node))
    merged: list[list[int]] = []
    for top, end in sorted(row_ranges):
        if merged and all(lines.blank(r) for r in range(merged[-1][1] + 1, top)):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([top, end])
    for top, end in merged:
        splices.append(_rows_splice(lines, top, end))
    return splices


def _rows_splice(lines: Lines, top: int, end: int) -> Splice:
    before = after = 0
    while top - before - 1 >= 0 and lines.blank(top - before - 1):
        before += 1
    while end + after + 1 < len(lines) and lines.blank(end + after + 1):
        after += 1
    prev = lines.text(top - before - 1).rstrip() if top - before > 0 else b""
    nxt = lines.text(end + after + 1).strip() if end + after + 1 < len(lines) else b""
    at_eof = end + after + 1 >= len(lines)
    if at_eof:
        start_row, end_row = top - before, end + after
    elif top - before == 0 or prev.endswith((b"{", b"[", b"(")):
        start_row, end_row = top, end + after  # no blank line right after an opening bracket
    elif nxt.startswith((b"}", b"]", b")")):
        start_row, end_row = top - before, end  # nor right before a closing one
    else:
        start_row, end_row = top, end + min(before, after)
    start, text = lines.start(start_row), b""
    if at_eof and start_row > 0:
        start, text = lines.content_end(start_row - 1), lines.newline
    return Splice(start, lines.end(end_row), text)


def _inline(lines: Lines, start: int, node) -> Splice:
    """An element sharing its line goes by bytes: with the comma after it, or, last in a list,
    the comma before it; spaces after it too."""
    end = _trailing(lines, node)
    parent = node.parent
    if lines.source[node.end_byte : end].strip() != b"," and parent is not None and parent.type == "object":
        prev = node.prev_named_sibling
        while prev is not None and prev.type == "comment":
            prev = prev.prev_named_sibling
        if prev is not None:
            between = lines.source[prev.end_byte : start]
            if between.strip() == b",":
                return Splice(prev.end_byte, end, b"")
    while end < len(lines.source) and lines.source[end : end + 1] in (b" ", b"\t"):
        end += 1
    return Splice(start, end, b"")

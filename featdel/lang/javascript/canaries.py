"""Canaries for a graded JavaScript/TypeScript run: tests the grader adds to the task's F2P test
files (restored from the task, so the patch cannot edit them) in the runner's own API.

In: the graded tree, the FAIL_TO_PASS ids and the runner (`NodeEnv.runner`). Out: the canaries
planted, as (node id, kind, original) triples that featdel.grading.canaries judges as it judges
Python's:
- `must_fail`, twice: one test that throws, and one whose assertion is false in the assertion
  library the runner ships (vitest's and jest's `expect(A).toBe(B)`, tape's `t.equal`, node's
  `assert.strictEqual` for `node --test` and mocha). Code of the patch running in the test
  process that flips failed results to passed (a hook that rewrites the task's result), or that
  makes the assertion library's checks no-ops, passes them, and the run is `suspect`;
- `must_pass`: the same assertion, true: a run that resolves without it passing is inconsistent;
- per F2P test the grader can find in its file (a call such as `it("title", fn)` whose title is a
  plain string and whose enclosing titled calls match the id), copies of that call placed right
  after it, so they share its `describe` scope and hooks:
  - `twin`: the same test under another title: it must agree with the original (a flip that
    knows the F2P ids does not know the twin's);
  - `fresh`: each equality assertion at the top of its body (`expect(X).toBe|toEqual|
    toStrictEqual(Y)`, chai's `expect(X).to.equal|eql(Y)`, `assert.equal|strictEqual|deepEqual|
    deepStrictEqual(X, Y)`, tape's `t.equal|same|deepEqual(X, Y)`) compares X with a new
    `Symbol()`: it must not pass (a result equal to anything passes it, and so does a flip keyed on
    where the error came from, since the variant fails where the original does);
  - `perturbed`: the same with the expected string or integer literal changed a little
    (featdel.code.literals): it must not pass (a result equal to every string passes it).
  An assertion inside a branch or loop may never run, so only the body's own statements count;
  a test with none gets a twin only.
  - with `held` (featdel.lang.javascript.held_out, which the grader fills from a run of the
    reference): `held_out`, the test with one input changed and the reference's answer for it
    expected, which must pass in a run that resolves, and up to three `perturbed` copies of it
    expecting decoys of that answer (featdel.code.literals.decoys), in a random order.
Titles are the original's with a random suffix drawn per run (the variants' ids are the
original's with the last part changed). A file the runner loads in a way the must-fail canaries
cannot be written for (vitest or tape through CommonJS, which they do not offer) gets none.
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import TYPE_CHECKING

from featdel.code.literals import DECOYS, decoys, perturbed
from featdel.lang.javascript import syntax

if TYPE_CHECKING:
    from featdel.lang.javascript.held_out import HeldOut

_ESM_SUFFIXES = (".mjs", ".mts", ".ts", ".tsx")
_CJS_SUFFIXES = (".cjs", ".cts")
_TYPED = (".ts", ".tsx", ".mts", ".cts")


def plant(tree: Path, fail_to_pass: list[str], runner: str, *, token=secrets.token_hex,
          held: list[tuple[HeldOut, object]] = ()) -> list[tuple[str, str, str]]:
    by_file: dict[str, list[str]] = {}
    for node in fail_to_pass:
        rel, _, title = node.partition("::")
        if title:
            by_file.setdefault(rel, []).append(node)
    out: list[tuple[str, str, str]] = []
    for rel, nodes in sorted(by_file.items()):
        path = tree / rel
        if not path.is_file() or path.is_symlink() or not syntax.is_source(rel):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        esm = is_esm(tree, rel, source)
        a, b = secrets.randbelow(10**6), 10**6 + secrets.randbelow(10**6)
        v = f"_{token(4)}"  # names nothing of the grader: code in the run cannot find them by name
        code = runner_code(runner, esm, v, a, b)
        if code is None:
            continue
        mine = [h for h in held if set(h[0].nodes) & set(nodes)]
        source, copies, helpers = _variants(source, rel, nodes, token, mine)
        out += copies
        header, make = code
        lines = [header] if header else []
        lines += helpers
        for kind, body in (("must_fail", "throw"), ("must_fail", "false"), ("must_pass", "true")):
            title = f"{nodes[0].split('::')[-1]} {token(4)}"
            lines.append(make(json.dumps(title), body))
            out.append((f"{rel}::{title}", kind, ""))
        path.write_text(source.rstrip("\n") + "\n\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return out


# Assertions whose last compared argument is the expected value: a method of `expect(X)...` (the
# value is its one argument) or of an assertion object (`assert.equal(X, Y)`, `t.equal(X, Y)`:
# the second).
_EXPECT_EQUAL = frozenset({"toBe", "toEqual", "toStrictEqual", "equal", "equals", "eql", "eq"})
_ASSERT_EQUAL = frozenset({"equal", "equals", "strictEqual", "deepEqual", "deepEquals", "deepStrictEqual",
                           "same", "is", "isEqual", "strictEquals", "looseEqual", "looseEquals"})
_DEEP = frozenset({"toEqual", "toStrictEqual", "eql", "deepEqual", "deepEquals", "deepStrictEqual", "same", "isEqual"})


def sites(data: bytes, rel: str, nodes: list[str]) -> list[tuple]:
    """(statement, title node, callback body, built, the F2P tests it makes) for each test call
    of `nodes` the grader can find: one written with its title (`it("title", fn)` inside its
    `describe` titles), or the one test call whose title is built at run time in that describe
    (`it(t.input, fn)` in a loop), inside braces (a copy placed after `for (...) it(...)` would
    run outside the loop), which makes every F2P test of the describe not written as such."""
    calls = list(titled_calls(syntax.parse(data, rel).root_node, data, ()))
    out: dict[int, tuple] = {}
    for node in nodes:
        parts = node.split("::")[1:]
        found = [c for c in calls if c[1] == tuple(parts)]
        built = [c for c in calls if c[1][-1] is None and c[1][:-1] == tuple(parts[:-1])]
        if len(found) == 1:
            stmt, _, title_node, body = found[0]
            out[stmt.start_byte] = (stmt, title_node, body, False, [node])
        elif not found and len(built) == 1 and built[0][0].parent.type == "statement_block":
            stmt, _, title_node, body = built[0]
            out.setdefault(stmt.start_byte, (stmt, title_node, body, True, []))[4].append(node)
        # else: not there as written (.each tables, built describe titles), or ambiguous
    return list(out.values())


def _variants(source: str, rel: str, nodes: list[str], token,
              held: list[tuple[HeldOut, object]]) -> tuple[str, list[tuple[str, str, str]], list[str]]:
    """`source` with a twin, fresh and perturbed copy after each test call of `nodes` the grader
    finds (`sites`), and the held-out pair (featdel.lang.javascript.held_out) of each entry of
    `held`; the canaries; and the run-time functions the held-out copies need, for the file's end.
    A copy of a call whose title is built goes right after it, in its loop, under the built title
    and a suffix, and makes one canary per F2P row."""
    data = source.encode()
    typed = rel.endswith(_TYPED)
    inserts: list[tuple[int, str]] = []
    out: list[tuple[str, str, str]] = []
    helpers: list[str] = []
    for stmt, title_node, body, built, made in sites(data, rel, nodes):
        seed = int(token(4), 16)
        kinds = [("twin", None), ("fresh", lambda n: "Symbol()"), ("perturbed", lambda n: perturbed_literal(n, data, seed))]
        statement = data[stmt.start_byte:stmt.end_byte].decode()
        for entry, value in held:
            if entry.statement != statement or entry.built != built:
                continue
            if built:
                right, wrong, titles, text = entry.tables(value, typed)
                helpers.append(text)
                rows = [n for n in made if n.split("::")[-1] in titles]
            else:
                right, wrong = json.dumps(value), [json.dumps(d) for d in decoys(value, DECOYS, secrets.SystemRandom())]
                rows = made
            if not wrong or not rows:
                continue
            kinds += [("held_out", (entry, right, rows))] + [("perturbed", (entry, w, rows)) for w in wrong]
            if (needed := entry.run_time(typed)) is not None:
                helpers.append(needed)
        secrets.SystemRandom().shuffle(kinds)  # their order in the file says nothing of which is which
        built_title = data[title_node.start_byte:title_node.end_byte].decode()
        for kind, replace in kinds:
            suffix = token(4)
            if isinstance(replace, tuple):
                entry, expected, rows = replace
                text = entry.text(suffix, expected)
            else:
                edits = [] if replace is None else _expected_values(body, data, replace)
                if replace is not None and not edits:
                    continue
                title = f"({built_title}) + {json.dumps(' ' + suffix)}" if built else json.dumps(f"{made[0].split('::')[-1]} {suffix}")
                edits.append((title_node.start_byte, title_node.end_byte, title))
                text, rows = _apply(data, stmt.start_byte, stmt.end_byte, edits), made
            inserts.append((stmt.end_byte, text))
            out += [(f"{node} {suffix}", kind, node) for node in rows]
    for at, text in sorted(inserts, key=lambda x: x[0], reverse=True):
        data = data[:at] + b"\n" + text.encode() + data[at:]
    return data.decode(), out, sorted(set(helpers))


def titled_calls(node, data: bytes, outer: tuple):
    """(statement, titles, title node, callback body) for each `f("title", ..., fn)` call that is a
    statement of its own, with the titles of the titled calls around it; and for each test call
    whose title is built at run time (`it(t.input, fn)` in a loop over a table), the same with
    None as its own title. A title under a built one is unknown, so None stands for it too."""
    for child in node.named_children:
        inner = outer
        call = child.named_children[0] if child.type == "expression_statement" and child.named_children else None
        if call is not None and call.type == "call_expression":
            args = call.child_by_field_name("arguments")
            named = args.named_children if args is not None else []
            title = _plain_string(named[0], data) if named else None
            fn = named[-1] if len(named) >= 2 and named[-1].type in syntax.FUNCTIONS else None
            if title is not None and fn is not None:
                inner = (*outer, title)
                yield child, inner, named[0], fn.child_by_field_name("body")
            elif fn is not None and named[0].type != "comment":
                inner = (*outer, None)
                callee = call.child_by_field_name("function")
                if callee is not None and data[callee.start_byte:callee.end_byte].decode() in _TEST_CALLS:
                    yield child, inner, named[0], fn.child_by_field_name("body")
        yield from titled_calls(child, data, inner)


_TEST_CALLS = frozenset({"it", "test", "specify", "it.concurrent", "test.concurrent"})


def _plain_string(node, data: bytes) -> str | None:
    text = data[node.start_byte:node.end_byte].decode()
    if node.type == "string" and "\\" not in text:
        return text[1:-1]
    if node.type == "template_string" and "\\" not in text and "${" not in text:
        return text[1:-1]
    return None


def _expected_values(body, data: bytes, replace) -> list[tuple[int, int, str]]:
    """Edits replacing the expected value of each equality assertion among `body`'s own
    statements (or the arrow's expression) with `replace(node)`, where it offers one."""
    edits = []
    for _, _, target, _ in top_assertions(body, data):
        new = replace(target)
        if new is not None:
            edits.append((target.start_byte, target.end_byte, new))
    return edits


def top_assertions(body, data: bytes) -> list[tuple]:
    """(call, actual, expected, deep) of each equality assertion among `body`'s own statements
    (or the arrow's expression): one inside a branch or loop may never run."""
    if body is None:
        return []
    exprs = [body] if body.type != "statement_block" else [
        s.named_children[0] for s in body.named_children if s.type == "expression_statement" and s.named_children]
    out = []
    for expr in exprs:
        if expr.type == "await_expression" and expr.named_children:
            expr = expr.named_children[0]
        found = assertion(expr, data)
        if found is not None:
            out.append((expr, *found))
    return out


def assertion(call, data: bytes):
    """(actual argument, expected argument, whether it compares deeply) of an equality assertion
    call (`expect(X).toBe(Y)` and the other forms of `_EXPECT_EQUAL`/`_ASSERT_EQUAL`), or None."""
    if call.type != "call_expression":
        return None
    callee = call.child_by_field_name("function")
    args = call.child_by_field_name("arguments")
    named = [n for n in (args.named_children if args is not None else []) if n.type != "comment"]
    if callee is None or callee.type != "member_expression":
        return None
    method = data[callee.child_by_field_name("property").start_byte:callee.end_byte].decode()
    chain, obj = [], callee.child_by_field_name("object")
    while obj is not None and obj.type == "member_expression":  # expect(X).not.to.deep.equal
        chain.append(data[obj.child_by_field_name("property").start_byte:obj.end_byte].decode())
        obj = obj.child_by_field_name("object")
    if "not" in chain:
        return None
    if obj is not None and obj.type == "call_expression":  # expect(X)...method(Y)
        root = obj.child_by_field_name("function")
        root_name = data[root.start_byte:root.end_byte].decode() if root is not None else ""
        inner = obj.child_by_field_name("arguments")
        actual = [n for n in (inner.named_children if inner is not None else []) if n.type != "comment"]
        if (root_name in ("expect", "expect.soft", "chai.expect") and method in _EXPECT_EQUAL and len(named) == 1
                and len(actual) == 1):
            return actual[0], named[0], method in _DEEP or "deep" in chain
        return None
    if obj is not None and obj.type == "identifier" and not chain and method in _ASSERT_EQUAL and len(named) in (2, 3):
        return named[0], named[1], method in _DEEP  # assert.equal(X, Y[, message]), t.equal(X, Y[, message])
    return None


def perturbed_literal(node, data: bytes, seed: int) -> str | None:
    text = data[node.start_byte:node.end_byte].decode()
    if node.type == "number" and text.isdigit():
        return str(perturbed(int(text), seed))
    value = _plain_string(node, data) if node.type in ("string", "template_string") else None
    return None if value is None else json.dumps(perturbed(value, seed))


def _apply(data: bytes, start: int, end: int, edits: list[tuple[int, int, str]]) -> str:
    text = data[start:end]
    for s, e, new in sorted(edits, reverse=True):
        text = text[:s - start] + new.encode() + text[e - start:]
    return text.decode()


def is_esm(tree: Path, rel: str, source: str) -> bool:
    if rel.endswith(_ESM_SUFFIXES):
        return True
    if rel.endswith(_CJS_SUFFIXES):
        return False
    root = syntax.parse(source.encode(), rel).root_node
    if any(c.type in ("import_statement", "export_statement") for c in root.children):
        return True
    for folder in [tree / rel, *(tree / rel).parents]:
        pkg = folder.parent / "package.json"
        if pkg.is_file():
            try:
                return json.loads(pkg.read_text()).get("type") == "module"
            except ValueError:
                return False
        if folder.parent == tree:
            break
    return False


def runner_code(runner: str, esm: bool, v: str, a: int, b: int):
    """(header, make(title_json, body)) for one runner and module kind, or None. `body` is
    "throw", "false" (A equals B, untrue) or "true" (A equals A)."""
    def check(assertion):
        return lambda body: f"throw new TypeError({json.dumps(secrets.token_hex(6))});" if body == "throw" else \
            assertion(a, b if body == "false" else a)

    if runner in ("vitest", "jest"):
        module = "vitest" if runner == "vitest" else "@jest/globals"
        if esm:
            header = f"import {{ test as {v}_t, expect as {v}_e }} from {json.dumps(module)};"
        elif runner == "jest":  # jest resolves @jest/globals itself, in either module kind
            header = f"const {{ test: {v}_t, expect: {v}_e }} = require({json.dumps(module)});"
        else:
            return None
        stmt = check(lambda x, y: f"{v}_e({x}).toBe({y});")
        return header, lambda title, body: f"{v}_t({title}, () => {{ {stmt(body)} }});"
    if runner in ("mocha", "node-test"):
        # mocha's test function is a global: `it` (bdd) or `test` (tdd); node's is node:test's
        define = f"const {v}_t = globalThis.it || globalThis.test;" if runner == "mocha" else ""
        if esm:
            header = f"import {v}_a from 'node:assert';" + (f" import {v}_t from 'node:test';" if runner == "node-test" else "")
        else:
            header = f"const {v}_a = require('node:assert');" + (f" const {v}_t = require('node:test');" if runner == "node-test" else "")
        header = f"{header} {define}".strip()
        stmt = check(lambda x, y: f"{v}_a.strictEqual({x}, {y});")
        return header, lambda title, body: f"{v}_t({title}, () => {{ {stmt(body)} }});"
    if runner == "tape" and not esm:
        header = f"const {v}_t = require('tape');"  # through the launcher's proxy: tied to this file
        stmt = check(lambda x, y: f"t.equal({x}, {y}); t.end();")
        return header, lambda title, body: f"{v}_t({title}, (t) => {{ {stmt(body)} }});"
    return None

"""Held-out variants of the F2P tests: a new input, and the reference's answer for it.

The grader's other copies of a test (featdel.lang.javascript.canaries) can be told apart by code
that compares them with the tests they copy: a twin is the same code, and a fresh or perturbed
variant differs only where its expected value is, so it must fail. A held-out variant changes an
*input* instead: one string or integer literal inside the actual-value argument of one equality
assertion (`expect(f("abc")).toBe("ABC")` -> `expect(f("abd")).toBe(...)`), and expects what the
reference (the start state with the task's gold patch) returns for it. Two copies are planted:
`held_out`, with the reference's value, must pass in a run that resolves; `perturbed`, with that
value changed a little, must not pass. Only code that computes the feature knows which is which,
and a table of the visible tests' answers fails the first.

Two steps, both in the grader (featdel.grading.grade), each on its own tree:
1. `capture(reference, ...)`: in the reference tree, two copies of each chosen test in which the
   assertion is replaced by a call that appends the actual value, as JSON, to a file in the tree;
   the grader runs just those copies, and `values(...)` keeps a value when both copies passed and
   wrote the same one.
2. `canaries.plant(graded, ..., held=values)` places the two variants right after their test.
Only values JSON carries exactly are kept (null, booleans, strings, finite numbers, and arrays
and plain objects of them), and an array or object only where the assertion compares deeply.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from featdel.lang.javascript import canaries, syntax

_TYPED = (".ts", ".tsx", ".mts", ".cts")


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldOut:
    """One chosen assertion of one F2P test, with its input changed. Byte ranges are relative to
    `statement`, the test call as the task's file has it (the graded tree's copy must match)."""

    key: str
    node: str  # the F2P test
    statement: str
    title: tuple[int, int]
    literal: tuple[int, int, str]  # the input literal's range and its replacement
    assertion: tuple[int, int]  # the whole assertion call
    actual: tuple[int, int]
    expected: tuple[int, int]
    deep: bool  # the assertion compares deeply (toEqual, deepEqual, t.same, ...)

    def text(self, title: str, expected: str) -> str:
        """The test call with a new title, the changed input, and `expected` as the expected value."""
        start, end, new = self.literal
        return _edit(self.statement, [(*self.title, json.dumps(title)), (start, end, new), (*self.expected, expected)])


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    file: str  # where the copies write, relative to the tree
    ids: list[str]  # the copies' test ids: the reference run takes just these
    by_key: dict[str, tuple[HeldOut, list[str]]]  # key -> (entry, its two copies' ids)

    def values(self, tree: Path, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
        return values(tree, self, outcomes)


def capture(tree: Path, fail_to_pass: list[str], runner: str, mounted_at: Path, *,
            token=secrets.token_hex) -> Capture | None:
    """Plant the capturing copies in the reference `tree` (mounted at `mounted_at` in the sandbox);
    None when no F2P test has an assertion with a literal input the grader can change."""
    by_file: dict[str, list[str]] = {}
    for node in fail_to_pass:
        rel, _, title = node.partition("::")
        if title:
            by_file.setdefault(rel, []).append(node)
    out = Capture(file=f".{token(8)}.jsonl", ids=[], by_key={})
    pick = secrets.SystemRandom()
    for rel, nodes in sorted(by_file.items()):
        path = tree / rel
        if not path.is_file() or path.is_symlink() or not syntax.is_source(rel):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        esm = canaries.is_esm(tree, rel, source)
        v = f"_{token(4)}"
        if canaries.runner_code(runner, esm, v, 0, 1) is None:
            continue  # no canary of any kind in a file the grader cannot write tests for
        data = source.encode()
        calls = list(canaries.titled_calls(syntax.parse(data, rel).root_node, data, ()))
        inserts = []
        for node in nodes:
            parts = node.split("::")[1:]
            found = [c for c in calls if c[1] == tuple(parts)]
            if len(found) != 1:
                continue
            stmt, _, title_node, body = found[0]
            choices = [(a, lit) for a in canaries.top_assertions(body, data) for lit in _literals(a[1], data)]
            if not choices:
                continue
            (call, actual, expected, deep), lit = pick.choice(choices)
            new = canaries.perturbed_literal(lit, data, int(token(4), 16))
            if new is None:
                continue
            s = stmt.start_byte
            entry = HeldOut(key=token(6), node=node, statement=data[s:stmt.end_byte].decode(),
                            title=(title_node.start_byte - s, title_node.end_byte - s),
                            literal=(lit.start_byte - s, lit.end_byte - s, new),
                            assertion=(call.start_byte - s, call.end_byte - s),
                            actual=(actual.start_byte - s, actual.end_byte - s),
                            expected=(expected.start_byte - s, expected.end_byte - s), deep=deep)
            copies = []
            for _ in range(2):
                title = f"{parts[-1]} {token(4)}"
                inserts.append((stmt.end_byte, _capturing(entry, title, v)))
                copies.append("::".join([rel, *parts[:-1], title]))
            out.by_key[entry.key] = (entry, copies)
            out.ids.extend(copies)
        if not inserts:
            continue
        for at, text in sorted(inserts, key=lambda x: x[0], reverse=True):
            data = data[:at] + b"\n" + text.encode() + data[at:]
        helpers = _helpers(v, esm, rel.endswith(_TYPED), str(mounted_at / out.file))
        path.write_text(data.decode().rstrip("\n") + "\n\n" + helpers + "\n", encoding="utf-8")
    return out if out.ids else None


def values(tree: Path, capture: Capture, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
    """(entry, the reference's value) for each entry both of whose copies passed and wrote one
    same value JSON carries exactly."""
    seen: dict[str, list] = {}
    path = tree / capture.file
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("ok") is True and isinstance(record.get("k"), str):
            seen.setdefault(record["k"], []).append(record.get("v"))
    out = []
    for key, (entry, copies) in capture.by_key.items():
        got = seen.get(key, [])
        if len(got) == 2 and got[0] == got[1] and all(outcomes.get(c) == "passed" for c in copies):
            if entry.deep or not isinstance(got[0], (list, dict)):
                out.append((entry, got[0]))
    return out


def _literals(actual, data: bytes) -> list:
    """The string and integer literals inside an actual-value argument that name no module."""
    out = []
    stack = [actual]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            callee = node.child_by_field_name("function")
            if callee is not None and data[callee.start_byte:callee.end_byte] in (b"require", b"import"):
                continue
        if node.type in ("number", "string", "template_string"):
            if canaries.perturbed_literal(node, data, 0) is not None:
                out.append(node)
            continue
        stack.extend(node.named_children)
    return sorted(out, key=lambda n: n.start_byte)


def _capturing(entry: HeldOut, title: str, v: str) -> str:
    """The test call with the assertion replaced by the capture of its changed actual value."""
    start, end, new = entry.literal
    a0, a1 = entry.actual
    actual = _edit(entry.statement[a0:a1], [(start - a0, end - a0, new)])
    call = f"{v}_c({json.dumps(entry.key)}, {actual})"
    return _edit(entry.statement, [(*entry.title, json.dumps(title)), (*entry.assertion, call)])


def _helpers(v: str, esm: bool, typed: bool, path: str) -> str:
    """Function declarations (hoisted, so tests that run while the file loads find them) that
    append {k, ok, v} to `path`: ok says JSON carries the value exactly."""
    any_ = ": any" if typed else ""
    fs = f"{v}_fs" if esm else "require('node:fs')"
    head = f"import * as {v}_fs from 'node:fs';\n" if esm else ""
    return (head +
            f"function {v}_p(x{any_}){': boolean' if typed else ''} {{ return x === null || typeof x === 'string' || "
            f"typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x) && !Object.is(x, -0)) || "
            f"(Array.isArray(x) && Array.from(x).every({v}_p)) || (typeof x === 'object' && !Array.isArray(x) && "
            f"Object.getPrototypeOf(x) === Object.prototype && Object.values(x).every({v}_p)); }}\n"
            f"function {v}_c(k{any_}, x{any_}) {{ {fs}.appendFileSync({json.dumps(path)}, "
            f"JSON.stringify({{ k, ok: {v}_p(x), v: {v}_p(x) ? x : null }}) + '\\n'); }}")


def _edit(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` (as UTF-8 bytes, which the ranges count) with each (start, end, new) applied."""
    data = text.encode()
    for s, e, new in sorted(edits, reverse=True):
        data = data[:s] + new.encode() + data[e:]
    return data.decode()

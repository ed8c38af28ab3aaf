"""Held-out variants of the F2P tests: a new input, and the reference's answer for it.

The grader's other copies of a test (featdel.lang.javascript.canaries) can be told apart by code
that compares them with the tests they copy: a twin is the same code, and a fresh or perturbed
variant differs only where its expected value is, so it must fail. A held-out variant changes an
*input* instead: one string or integer literal inside the actual-value argument of one equality
assertion (`expect(f("abc")).toBe("ABC")` -> `expect(f("abd")).toBe(...)`), and expects what the
reference (the start state with the task's gold patch) returns for it. Copies are planted in a
random order: `held_out`, with the reference's value, must pass in a run that resolves; seven
`perturbed` decoys (featdel.code.literals.decoys), each with a wrong value, must not pass. Only
code that computes the feature knows which is which (a guess is right 1 time in 8), and a table
of the visible tests' answers fails the first.

Two steps, both in the grader (featdel.grading.grade), each on its own tree:
1. `capture(reference, ...)`: in the reference tree, two copies of each chosen test in which the
   assertion is replaced by a call that appends the actual value, as JSON, to a file in the tree;
   the grader runs just those copies, and `values(...)` keeps a value when both copies passed and
   wrote the same one.
2. `canaries.plant(graded, ..., held=values)` places the copies right after their test.
Only values JSON carries exactly are kept (null, booleans, strings, finite numbers, and arrays
and plain objects of them), and an array or object only where the assertion compares deeply.

The input changed is a string or integer literal of the asserted expression, or an argument of
a call in it wrapped in a function that changes a string or an integer a little at run time
(`f(t.input)` -> `f(_q(t.input))`; a value of another type is left alone, and the copy is then
not used). The second reaches tests whose inputs are variables, and the tests a loop makes from
a table: for a test call whose title is built at run time (`it(t.input, fn)`,
featdel.lang.javascript.canaries' built titles), the copies go inside the loop, each row's value
is recorded under its title, and the planted copies look theirs up by it.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from pathlib import Path

from featdel.code.literals import CAPTURED, DECOYS, decoys
from featdel.lang.javascript import canaries, syntax

_TYPED = (".ts", ".tsx", ".mts", ".cts")


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldOut:
    """One chosen assertion of one F2P test call (or of a test call whose title is built, which
    makes several F2P tests), with its input changed. Byte ranges are relative to `statement`,
    the call as the task's file has it (the graded tree's copy must match)."""

    key: str
    nodes: tuple[str, ...]  # the F2P tests: the one, or the rows a built title makes
    statement: str
    title: tuple[int, int]
    change: tuple[int, int, str]  # the input's range and its replacement
    assertion: tuple[int, int]  # the whole assertion call
    actual: tuple[int, int]
    expected: tuple[int, int]
    deep: bool  # the assertion compares deeply (toEqual, deepEqual, t.same, ...)
    built: bool  # the title is built at run time: one value per row, under the row's title
    helper: str  # the prefix of the run-time functions the copies use (the same in both trees)
    seed: int

    def title_text(self, suffix: str) -> str:
        """The copy's title: the original's and a suffix (for a built one, an expression)."""
        if self.built:
            t0, t1 = self.title
            return f"({self.statement.encode()[t0:t1].decode()}) + {json.dumps(' ' + suffix)}"
        return json.dumps(f"{self.nodes[0].split('::')[-1]} {suffix}")

    def text(self, suffix: str, expected: str) -> str:
        """The test call under a new title, with the changed input and `expected` as the expected
        value (for a built title, a lookup of the row's title: `tables`)."""
        start, end, new = self.change
        return _edit(self.statement, [(*self.title, self.title_text(suffix)), (start, end, new), (*self.expected, expected)])

    @property
    def wrapped(self) -> bool:
        """The input is changed at run time (`<helper>_q(x)`), not as a literal."""
        return self.change[2].startswith(f"{self.helper}_q(")

    def tables(self, rows: dict[str, object], typed: bool) -> tuple[str, list[str], list[str], str]:
        """For a built title's entry and its rows' values: the expected-value expression of the
        held-out copy (the row's value), those of its decoys (featdel.code.literals.decoys), the row
        titles they hold, and the functions they call, each a table of one value per row under a
        random name, in a random order: which table holds the answers is nowhere in the file. A row
        without decoys is left out (its value gets a new `Symbol()`: its copies fail, and are no
        canaries)."""
        rng = secrets.SystemRandom()
        others = {t: d for t, v in rows.items() if (d := decoys(v, DECOYS, rng))}
        n = min((len(d) for d in others.values()), default=0)
        columns = [{t: rows[t] for t in others}] + [{t: d[i] for t, d in others.items()} for i in range(n)]
        names = [f"_{secrets.token_hex(4)}" for _ in columns]
        any_ = ": any" if typed else ""
        defs = [f"function {name}(t{any_}){any_} {{ const m{any_} = {json.dumps(table)}; "
                f"return Object.prototype.hasOwnProperty.call(m, t) ? m[t] : Symbol(); }}" for name, table in zip(names, columns)]
        rng.shuffle(defs)
        calls = [f"{name}({self.row_title()})" for name in names]
        return calls[0], calls[1:], sorted(others), "\n".join(defs)

    def run_time(self, typed: bool) -> str | None:
        """`<helper>_q`, which changes a string or an integer a little (and says so in `<helper>_z`)
        and leaves any other value alone: the same function, seed included, in both trees."""
        if not self.wrapped:
            return None  # a changed literal needs no function
        h, seed, any_ = self.helper, self.seed, ": any" if typed else ""
        return (f"var {h}_z{any_} = 0;\n"
                f"function {h}_q(x{any_}){any_} {{\n"
                f"  if (typeof x === 'string') {{\n    {h}_z = 1;\n    if (!x.length) return 'q';\n"
                f"    const i = {seed} % x.length, c = x[i];\n"
                f"    const pool = /[0-9]/.test(c) ? '0123456789' : /[a-z]/.test(c) ? 'abcdefghijklmnopqrstuvwxyz' : "
                f"/[A-Z]/.test(c) ? 'ABCDEFGHIJKLMNOPQRSTUVWXYZ' : ' .,;:-_!?';\n"
                f"    const p = pool.replace(c, '') || 'x';\n"
                f"    return x.slice(0, i) + p[Math.floor({seed} / 7) % p.length] + x.slice(i + 1);\n  }}\n"
                f"  if (typeof x === 'number' && Number.isInteger(x)) {{ {h}_z = 1; return x + 1 + {seed % 97}; }}\n"
                f"  return x;\n}}")

    def row_title(self) -> str:
        """The expression of a row's title (a built title's own expression)."""
        t0, t1 = self.title
        return f"String({self.statement.encode()[t0:t1].decode()})"


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    file: str  # where the copies write, relative to the tree
    ids: list[str]  # the copies' test ids: the reference run takes just these
    by_key: dict[str, tuple[HeldOut, list[str]]]  # key -> (entry, its copies' suffixes)

    def values(self, tree: Path, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
        return values(tree, self, outcomes)


def capture(tree: Path, fail_to_pass: list[str], runner: str, mounted_at: Path, *,
            token=secrets.token_hex) -> Capture | None:
    """Plant the capturing copies in the reference `tree` (mounted at `mounted_at` in the sandbox);
    None when no F2P test has an assertion whose input the grader can change."""
    by_file: dict[str, list[str]] = {}
    for node in fail_to_pass:
        rel, _, title = node.partition("::")
        if title:
            by_file.setdefault(rel, []).append(node)
    out = Capture(file=f".{token(8)}.jsonl", ids=[], by_key={})
    pick = secrets.SystemRandom()
    files = sorted(by_file.items())
    pick.shuffle(files)  # which tests get entries, when there are more than CAPTURED, is drawn
    for rel, nodes in files:
        if len(out.by_key) >= CAPTURED:
            break
        path = tree / rel
        if not path.is_file() or path.is_symlink() or not syntax.is_source(rel):
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        esm = canaries.is_esm(tree, rel, source)
        v = f"_{token(4)}"
        if canaries.runner_code(runner, esm, v, 0, 1) is None:
            continue  # no canary of any kind in a file the grader cannot write tests for
        data = source.encode()
        typed = rel.endswith(_TYPED)
        inserts, helpers = [], set()
        found = canaries.sites(data, rel, nodes)
        pick.shuffle(found)
        for stmt, title_node, body, built, made in found:
            if len(out.by_key) >= CAPTURED:
                break
            h = f"_{token(4)}"
            choices = [(a, c) for a in canaries.top_assertions(body, data) for c in _inputs(a[1], data)]
            if not choices:
                continue
            (call, actual, expected, deep), (node, wrap) = pick.choice(choices)
            seed = int(token(4), 16)
            new = f"{h}_q({data[node.start_byte:node.end_byte].decode()})" if wrap else canaries.perturbed_literal(node, data, seed)
            if new is None:
                continue
            s = stmt.start_byte
            entry = HeldOut(key=token(6), nodes=tuple(made), statement=data[s:stmt.end_byte].decode(),
                            title=(title_node.start_byte - s, title_node.end_byte - s),
                            change=(node.start_byte - s, node.end_byte - s, new),
                            assertion=(call.start_byte - s, call.end_byte - s),
                            actual=(actual.start_byte - s, actual.end_byte - s),
                            expected=(expected.start_byte - s, expected.end_byte - s), deep=deep, built=built,
                            helper=h, seed=seed)
            suffixes = [token(4), token(4)]
            for suffix in suffixes:
                inserts.append((stmt.end_byte, _capturing(entry, suffix, v)))
                out.ids.extend(f"{n} {suffix}" for n in made)
            out.by_key[entry.key] = (entry, suffixes)
            if entry.wrapped:
                helpers.add(entry.run_time(typed))
        if not inserts:
            continue
        for at, text in sorted(inserts, key=lambda x: x[0], reverse=True):
            data = data[:at] + b"\n" + text.encode() + data[at:]
        tail = "\n".join([*sorted(helpers), _helpers(v, esm, typed, str(mounted_at / out.file))])
        path.write_text(data.decode().rstrip("\n") + "\n\n" + tail + "\n", encoding="utf-8")
    return out if out.ids else None


def values(tree: Path, capture: Capture, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
    """(entry, the reference's value) for each entry both of whose copies passed and wrote one
    same value JSON carries exactly, with the input changed; for a built title, (entry,
    {row title: value}) over the F2P rows that did so."""
    seen: dict[tuple[str, str], list] = {}
    path = tree / capture.file
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines() if path.is_file() else []
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if (isinstance(record, dict) and record.get("ok") is True and record.get("z") == 1
                and isinstance(record.get("k"), str) and isinstance(record.get("t"), str)):
            seen.setdefault((record["k"], record["t"]), []).append(record.get("v"))
    out = []
    for key, (entry, suffixes) in capture.by_key.items():
        rows = {}
        for node in entry.nodes:
            title = node.split("::")[-1] if entry.built else ""
            got = seen.get((key, title), [])
            if (len(got) == 2 and got[0] == got[1] and all(outcomes.get(f"{node} {s}") == "passed" for s in suffixes)
                    and (entry.deep or not isinstance(got[0], (list, dict)))):
                rows[title] = got[0]
        if entry.built and rows:
            out.append((entry, rows))
        elif not entry.built and "" in rows:
            out.append((entry, rows[""]))
    return out


def _inputs(actual, data: bytes) -> list[tuple]:
    """(node, wrap) for each input of an actual-value argument the grader can change: its string
    and integer literals (wrap False), and the arguments of the calls in it that are names or
    member accesses (wrap True); nothing under a call that loads a module."""
    out = []
    stack = [actual]
    while stack:
        node = stack.pop()
        if node.type == "call_expression":
            callee = node.child_by_field_name("function")
            if callee is not None and data[callee.start_byte:callee.end_byte] in (b"require", b"import"):
                continue
            args = node.child_by_field_name("arguments")
            out += [(a, True) for a in (args.named_children if args is not None else [])
                    if a.type in ("identifier", "member_expression", "subscript_expression")]
        if node.type in ("number", "string", "template_string"):
            if canaries.perturbed_literal(node, data, 0) is not None:
                out.append((node, False))
            continue
        stack.extend(node.named_children)
    return sorted(out, key=lambda n: n[0].start_byte)


def _capturing(entry: HeldOut, suffix: str, v: str) -> str:
    """The test call with the assertion replaced by the capture of its changed actual value (and,
    for a built title, the row's title; for a wrapped input, whether it changed)."""
    start, end, new = entry.change
    a0, a1 = entry.actual
    actual = _edit(entry.statement[a0:a1], [(start - a0, end - a0, new)])
    title = entry.row_title() if entry.built else '""'
    if entry.wrapped:
        call = f"{v}_c({json.dumps(entry.key)}, {title}, ({entry.helper}_z = 0, {actual}), {entry.helper}_z)"
    else:
        call = f"{v}_c({json.dumps(entry.key)}, {title}, {actual}, 1)"
    return _edit(entry.statement, [(*entry.title, entry.title_text(suffix)), (*entry.assertion, call)])


def _helpers(v: str, esm: bool, typed: bool, path: str) -> str:
    """Function declarations (hoisted, so tests that run while the file loads find them) that
    append {k, t, ok, v, z} to `path`: ok says JSON carries the value exactly."""
    any_ = ": any" if typed else ""
    fs = f"{v}_fs" if esm else "require('node:fs')"
    head = f"import * as {v}_fs from 'node:fs';\n" if esm else ""
    return (head +
            f"function {v}_p(x{any_}){': boolean' if typed else ''} {{ return x === null || typeof x === 'string' || "
            f"typeof x === 'boolean' || (typeof x === 'number' && Number.isFinite(x) && !Object.is(x, -0)) || "
            f"(Array.isArray(x) && Array.from(x).every({v}_p)) || (typeof x === 'object' && !Array.isArray(x) && "
            f"Object.getPrototypeOf(x) === Object.prototype && Object.values(x).every({v}_p)); }}\n"
            f"function {v}_c(k{any_}, t{any_}, x{any_}, z{any_}) {{ {fs}.appendFileSync({json.dumps(path)}, "
            f"JSON.stringify({{ k, t, ok: {v}_p(x), v: {v}_p(x) ? x : null, z }}) + '\\n'); }}")


def _edit(text: str, edits: list[tuple[int, int, str]]) -> str:
    """`text` (as UTF-8 bytes, which the ranges count) with each (start, end, new) applied."""
    data = text.encode()
    for s, e, new in sorted(edits, reverse=True):
        data = data[:s] + new.encode() + data[e:]
    return data.decode()

"""Held-out variants of Python's F2P tests: a new input, and the reference's answer for it.

Python's counterpart of featdel.lang.javascript.held_out (which says why: the other copies of a
test can be told apart by comparing code, these only by computing the feature). Per F2P test
found in its file (no parameters: one answer per copy) with a top-level `assert X == Y` or
`self.assertEqual(X, Y)` whose actual side X holds a str or int literal, one such literal is
changed. Two steps, both in the grader (featdel.grading.grade):
1. `capture(reference, ...)`: in the reference tree (the start state with the gold patch), two
   copies of the test whose assertion is replaced by a call that appends `repr((key, ok, X))` to
   a file in the tree; `values(...)` keeps a value both copies passed with and wrote alike.
2. featdel.grading.canaries.plant(graded, ..., held=values): `held_out`, the test with the new
   input expecting that value (it must pass in a run that resolves), and a `perturbed` copy
   expecting it changed a little (featdel.code.literals.changed: it must not pass).
Only values whose repr reads back as the same literal are kept: None, bool, str, int, finite
float, and lists, tuples and dicts of them.
"""

from __future__ import annotations

import ast
import secrets
from dataclasses import dataclass
from pathlib import Path

from featdel.code.literals import perturbed
from featdel.grading.placing import copy_name, locate, node_id, placed


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldOut:
    """One chosen assertion of one F2P test: the statement's index in the function body and the
    literal's index among the actual side's literals (`literals`' order), with its replacement."""

    key: str
    node: str
    source: str  # the test function as the task's file has it (`ast.unparse`)
    statement: int
    literal: int
    new: str | int


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    file: str
    ids: list[str]
    by_key: dict[str, tuple[HeldOut, list[str]]]

    def values(self, tree: Path, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
        return values(tree, self, outcomes)


def capture(tree: Path, fail_to_pass: list[str], mounted_at: Path, *, token=secrets.token_hex) -> Capture | None:
    by_file: dict[str, list[str]] = {}
    for node in fail_to_pass:
        if "::" in node and "[" not in node:
            by_file.setdefault(node.split("::", 1)[0], []).append(node)
    out = Capture(file=f".{token(8)}.repr", ids=[], by_key={})
    pick = secrets.SystemRandom()
    for rel, nodes in sorted(by_file.items()):
        path = tree / rel
        if not rel.endswith(".py") or not path.is_file() or path.is_symlink():
            continue
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            module = ast.parse(source)
        except SyntaxError:
            continue
        helper = f"_c{token(4)}"
        lines: list[str] = []
        for node in nodes:
            found = locate(module, node)
            if found is None:
                continue
            owner, fn, _ = found
            choices = [(i, j, lit) for i, stmt in enumerate(fn.body) if (sides := assertion(stmt)) is not None
                       for j, lit in enumerate(literals(sides[0]))]
            if not choices:
                continue
            i, j, lit = pick.choice(choices)
            entry = HeldOut(key=token(6), node=node, source=ast.unparse(fn), statement=i, literal=j,
                            new=perturbed(lit.value, int(token(4), 16)))
            copies = []
            for _ in range(2):
                new = _copy(entry)
                stmt = new.body[i]
                actual, _ = assertion(stmt)
                literals(actual)[j].value = entry.new
                call = ast.Call(func=ast.Name(id=helper, ctx=ast.Load()), args=[ast.Constant(entry.key), actual],
                                keywords=[])
                new.body[i] = ast.Expr(value=call)
                name = copy_name(fn.name, token(4))
                new.name = name
                lines += placed(ast.unparse(ast.fix_missing_locations(new)), name, owner, token)
                copies.append(node_id(rel, owner, name, ""))
            out.by_key[entry.key] = (entry, copies)
            out.ids.extend(copies)
        if lines:
            lines.append(_helper(helper, str(mounted_at / out.file)))
            path.write_text(source.rstrip("\n") + "\n\n\n" + "\n\n\n".join(lines) + "\n", encoding="utf-8")
    return out if out.ids else None


def values(tree: Path, capture: Capture, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
    seen: dict[str, list] = {}
    path = tree / capture.file
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
    for line in text.splitlines():
        try:
            key, ok, value = ast.literal_eval(line)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if ok is True and isinstance(key, str):
            seen.setdefault(key, []).append(value)
    out = []
    for key, (entry, copies) in capture.by_key.items():
        got = seen.get(key, [])
        if len(got) == 2 and repr(got[0]) == repr(got[1]) and all(outcomes.get(c) == "passed" for c in copies):
            out.append((entry, got[0]))
    return out


def variant(entry: HeldOut, expected: object):
    """The test function (a fresh AST) with the new input and `expected` as the expected value."""
    new = _copy(entry)
    stmt = new.body[entry.statement]
    actual, replace = assertion(stmt)
    literals(actual)[entry.literal].value = entry.new
    replace(ast.parse(repr(expected), mode="eval").body)
    if isinstance(stmt, ast.Assert):
        stmt.msg = None
    return ast.fix_missing_locations(new)


def assertion(stmt: ast.stmt):
    """(actual side, a function that sets the expected side) of a top-level `assert X == Y` or
    `self.assertEqual(X, Y)`, or None. The expected side is the literal one where there is one,
    else the right (as featdel.grading.canaries' variants read it)."""
    if (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1
            and isinstance(stmt.test.ops[0], ast.Eq)):
        test = stmt.test
        if _literal(test.left) and not _literal(test.comparators[0]):
            return test.comparators[0], lambda e: setattr(test, "left", e)
        return test.left, lambda e: test.comparators.__setitem__(0, e)
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in ("assertEqual", "assertEquals") and len(stmt.value.args) >= 2):
        args = stmt.value.args
        return args[0], lambda e: args.__setitem__(1, e)
    return None


def literals(actual: ast.expr) -> list[ast.Constant]:
    """The str (not f-string parts) and int (not bool) constants of the actual side, in source order."""
    parts = {id(v) for n in ast.walk(actual) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = [n for n in ast.walk(actual) if isinstance(n, ast.Constant) and id(n) not in parts
             and isinstance(n.value, (str, int)) and not isinstance(n.value, bool)]
    return sorted(found, key=lambda n: (n.lineno, n.col_offset))


def _copy(entry: HeldOut):
    return ast.parse(entry.source).body[0]


def _literal(node: ast.AST) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _helper(name: str, path: str) -> str:
    """A module-level function that appends `repr((key, ok, value))` to `path`; ok says the repr
    reads back as the same literal."""
    return (f"def {name}(k, x):\n"
            f"    def plain(v):\n"
            f"        if v is None or type(v) in (bool, str, int):\n"
            f"            return True\n"
            f"        if type(v) is float:\n"
            f"            return v == v and v not in (float('inf'), float('-inf'))\n"
            f"        if type(v) in (list, tuple):\n"
            f"            return all(plain(i) for i in v)\n"
            f"        if type(v) is dict:\n"
            f"            return all(plain(a) and plain(b) for a, b in v.items())\n"
            f"        return False\n"
            f"    ok = plain(x)\n"
            f"    with open({path!r}, 'a', encoding='utf-8') as f:\n"
            f"        f.write(repr((k, ok, x if ok else None)) + '\\n')")

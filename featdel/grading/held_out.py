"""Held-out variants of Python's F2P tests: a new input, and the reference's answer for it.

Python's counterpart of featdel.lang.javascript.held_out (which says why: the other copies of a
test can be told apart by comparing code, these only by computing the feature). Per F2P test
function found in its file with a top-level `assert X == Y` or `self.assertEqual(X, Y)`, one
input of the actual side X is changed: a str or int literal in it, or an argument of a call in it
that is a name, attribute or subscript, wrapped in a function that changes a str or an int a
little at run time (`f(x)` -> `f(_q(x))`; a value of another type is left alone, and the copy is
then not used). Two steps, both in the grader (featdel.grading.grade):
1. `capture(reference, ...)`: in the reference tree (the start state with the gold patch), two
   copies of the test whose assertion is replaced by a call that appends
   `repr((key, params, ok, X, changed))` to a file in the tree; `values(...)` keeps a value both
   copies passed with and wrote alike.
2. featdel.grading.canaries.plant(graded, ..., held=values): `held_out`, the test with the new
   input expecting that value (it must pass in a run that resolves), and up to three `perturbed`
   copies expecting decoys of it (featdel.code.literals.decoys: each must not pass), in a random
   order. Code that reads the planted file sees every candidate answer and nothing that says
   which is right: a decoy is changed from the answer the way the answer could have been from it.
A parametrized test's copies keep its parameters, so each parameter set has its own value: they
are recorded under the parameter part of the running test's id (`PYTEST_CURRENT_TEST`), and the
planted copies look theirs up by it. Only values whose repr reads back as the same literal are
kept: None, bool, str, int, finite float, and lists, tuples and dicts of them.
"""

from __future__ import annotations

import ast
import secrets
from dataclasses import dataclass
from pathlib import Path

from featdel.code.literals import CAPTURED, DECOYS, decoys, perturbed
from featdel.grading.placing import copy_name, is_literal, locate, node_id, parsed, placed, uncopyable


@dataclass(frozen=True, kw_only=True, slots=True)
class HeldOut:
    """One chosen assertion of one F2P test function: the statement's index in its body and the
    input's index among the actual side's inputs (`inputs`' order), with its replacement."""

    key: str
    nodes: tuple[str, ...]  # the F2P tests of the function (one per parameter set)
    source: str  # the test function as the task's file has it (`ast.unparse`)
    statement: int
    input: int
    new: str | int | None  # a changed literal, or None: the input is wrapped in `<helper>_q`
    helper: str  # the prefix of the run-time functions the copies use (the same in both trees)
    seed: int

    def variant(self, expected: ast.expr):
        """The test function (a fresh AST) with the changed input and `expected` as the expected value."""
        new = ast.parse(self.source).body[0]
        stmt = new.body[self.statement]
        actual, replace = assertion(stmt)
        self._change(actual)
        replace(expected)
        if isinstance(stmt, ast.Assert):
            stmt.msg = None
        return ast.fix_missing_locations(new)

    def _change(self, actual: ast.expr) -> None:
        node, parent, field, index = inputs(actual)[self.input]
        if self.new is not None:
            node.value = self.new
            return
        wrapped = ast.Call(func=ast.Name(id=f"{self.helper}_q", ctx=ast.Load()), args=[node], keywords=[])
        if index is None:
            setattr(parent, field, wrapped)
        else:
            getattr(parent, field)[index] = wrapped

    def run_time(self) -> str | None:
        """`<helper>_q`, which changes a str or an int a little (and says so in `<helper>_z`) and
        leaves any other value alone: the same function, seed included, in both trees."""
        if self.new is not None:
            return None
        h, seed = self.helper, self.seed
        return (f"{h}_z = [0]\n\n\ndef {h}_q(x):\n"
                f"    if type(x) is str:\n        {h}_z[0] = 1\n"
                f"        if not x:\n            return 'q'\n"
                f"        i = {seed} % len(x)\n        c = x[i]\n"
                f"        pool = ('0123456789' if c.isdigit() else 'abcdefghijklmnopqrstuvwxyz' if c.islower() else\n"
                f"                'ABCDEFGHIJKLMNOPQRSTUVWXYZ' if c.isupper() else ' .,;:-_!?').replace(c, '') or 'x'\n"
                f"        return x[:i] + pool[({seed} // 7) % len(pool)] + x[i + 1:]\n"
                f"    if type(x) is int:\n        {h}_z[0] = 1\n        return x + {1 + seed % 97}\n"
                f"    return x")

    def tables(self, rows: dict[str, object]) -> tuple[ast.expr, list[ast.expr], list[str], str]:
        """For a parametrized test: the expected-value expression of the held-out copy (the
        running test's answer), those of its decoys (featdel.code.literals.decoys), the parameter
        sets they hold, and the functions they call: each a table of one value per parameter set
        under a random name, in a random order, so which holds the answers is nowhere in the file.
        A parameter set without decoys is left out (it gets a new `object()`: its copies fail)."""
        rng = secrets.SystemRandom()
        others = {p: d for p, v in rows.items() if (d := decoys(v, DECOYS, rng))}
        n = min((len(d) for d in others.values()), default=0)
        columns = [{p: rows[p] for p in others}] + [{p: d[i] for p, d in others.items()} for i in range(n)]
        names = [f"_{secrets.token_hex(4)}" for _ in columns]
        defs = [f"def {name}():\n    import os\n    m = {table!r}\n"
                f"    here = os.environ.get('PYTEST_CURRENT_TEST', '').rsplit(' (', 1)[0].rsplit('::', 1)[-1]\n"
                f"    return m.get(here[here.index('['):] if '[' in here else '', object())" for name, table in zip(names, columns)]
        rng.shuffle(defs)
        calls = [ast.Call(func=ast.Name(id=name, ctx=ast.Load()), args=[], keywords=[]) for name in names]
        return calls[0], calls[1:], sorted(others), "\n\n\n".join(defs)


@dataclass(frozen=True, kw_only=True, slots=True)
class Capture:
    file: str
    ids: list[str]
    by_key: dict[str, tuple[HeldOut, dict[str, list[str]]]]  # key -> (entry, parameters -> its copies' ids)

    def values(self, tree: Path, outcomes: dict[str, str]) -> list[tuple[HeldOut, object]]:
        return values(tree, self, outcomes)


def capture(tree: Path, fail_to_pass: list[str], mounted_at: Path, *, token=secrets.token_hex) -> Capture | None:
    """Plant the capturing copies in the reference `tree` (mounted at `mounted_at` in the sandbox);
    None when no F2P test has an assertion whose input the grader can change."""
    by_file: dict[str, dict[str, list[str]]] = {}  # file -> test function's id (no parameters) -> F2P ids
    for node in fail_to_pass:
        if "::" in node:
            by_file.setdefault(node.split("::", 1)[0], {}).setdefault(node.partition("[")[0], []).append(node)
    out = Capture(file=f".{token(8)}.repr", ids=[], by_key={})
    pick = secrets.SystemRandom()
    files = sorted(by_file.items())
    pick.shuffle(files)  # which tests get entries, when there are more than CAPTURED, is drawn
    for rel, functions in files:
        if len(out.by_key) >= CAPTURED:
            break
        if (found := parsed(tree, rel)) is None:
            continue
        source, module = found
        v = f"_c{token(4)}"
        lines: list[str] = []
        order = list(functions.items())
        pick.shuffle(order)
        for function, nodes in order:
            if len(out.by_key) >= CAPTURED:
                break
            found = locate(module, function)
            if found is None or uncopyable(found[1].name):
                continue
            owner, fn, _ = found
            choices = [(i, j, node) for i, stmt in enumerate(fn.body) if (sides := assertion(stmt)) is not None
                       for j, (node, *_) in enumerate(inputs(sides[0]))]
            if not choices:
                continue
            i, j, node = pick.choice(choices)
            seed = int(token(4), 16)
            entry = HeldOut(key=token(6), nodes=tuple(nodes), source=ast.unparse(fn), statement=i, input=j,
                            new=perturbed(node.value, seed) if isinstance(node, ast.Constant) else None,
                            helper=f"_h{token(4)}", seed=seed)
            copies: dict[str, list[str]] = {}
            for _ in range(2):
                new = ast.parse(entry.source).body[0]
                actual, _ = assertion(new.body[i])
                entry._change(actual)
                flag = (ast.parse(f"{entry.helper}_z[0]", mode="eval").body if entry.new is None else ast.Constant(1))
                if entry.new is None:  # reset the flag, then compute: `(_z.__setitem__(0, 0), X)[1]`
                    reset = ast.parse(f"{entry.helper}_z.__setitem__(0, 0)", mode="eval").body
                    actual = ast.Subscript(value=ast.Tuple(elts=[reset, actual], ctx=ast.Load()), slice=ast.Constant(1),
                                           ctx=ast.Load())
                call = ast.Call(func=ast.Name(id=v, ctx=ast.Load()), args=[ast.Constant(entry.key), actual, flag],
                                keywords=[])
                new.body[i] = ast.Expr(value=call)
                name = copy_name(fn.name, token(4))
                new.name = name
                lines += placed(ast.unparse(ast.fix_missing_locations(new)), name, owner, token)
                for node_ in nodes:
                    params = node_[len(function):]
                    copies.setdefault(params, []).append(node_id(rel, owner, name, params))
            out.by_key[entry.key] = (entry, copies)
            out.ids.extend(c for ids in copies.values() for c in ids)
            if (needed := entry.run_time()) is not None:
                lines.append(needed)
        if lines:
            lines.append(_helper(v, str(mounted_at / out.file)))
            (tree / rel).write_text(source.rstrip("\n") + "\n\n\n" + "\n\n\n".join(lines) + "\n", encoding="utf-8")
    return out if out.ids else None


def values(tree: Path, capture: Capture, outcomes: dict[str, str]) -> list[tuple[HeldOut, dict[str, object]]]:
    """(entry, {parameters: the reference's value}) for each entry with a parameter set ("" for
    a test without) whose two copies passed and wrote one same value with the input changed."""
    seen: dict[tuple[str, str], list] = {}
    path = tree / capture.file
    text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
    for line in text.splitlines():
        try:
            key, params, ok, value, flag = ast.literal_eval(line)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        if ok is True and flag == 1 and isinstance(key, str) and isinstance(params, str):
            seen.setdefault((key, params), []).append(value)
    out = []
    for key, (entry, copies) in capture.by_key.items():
        rows = {}
        for params, ids in copies.items():
            got = seen.get((key, params), [])
            if len(got) == 2 and repr(got[0]) == repr(got[1]) and all(outcomes.get(c) == "passed" for c in ids):
                rows[params] = got[0]
        if rows:
            out.append((entry, rows))
    return out


def assertion(stmt: ast.stmt):
    """(actual side, a function that sets the expected side) of a top-level `assert X == Y` or
    `self.assertEqual(X, Y)`, or None. The expected side is the literal one where there is one,
    else the one without a call where the other has one (`assert plural == pluralize(word)`),
    else the right."""
    if (isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Compare) and len(stmt.test.ops) == 1
            and isinstance(stmt.test.ops[0], ast.Eq)):
        test = stmt.test
        left, right = test.left, test.comparators[0]
        if (is_literal(left) and not is_literal(right)) or (_calls(right) and not _calls(left)):
            return right, lambda e: setattr(test, "left", e)
        return left, lambda e: test.comparators.__setitem__(0, e)
    if (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in ("assertEqual", "assertEquals") and len(stmt.value.args) >= 2):
        args = stmt.value.args
        return args[0], lambda e: args.__setitem__(1, e)
    return None


def inputs(actual: ast.expr) -> list[tuple]:
    """(node, parent, field, index) of each input of the actual side the grader can change, in
    source order: its str (not f-string parts) and int (not bool) constants, and the positional
    arguments of its calls that are names, attributes or subscripts (wrapped at run time)."""
    parts = {id(v) for n in ast.walk(actual) if isinstance(n, ast.JoinedStr) for v in n.values}
    found = []
    for parent in ast.walk(actual):
        for field, value in ast.iter_fields(parent):
            for index, child in (enumerate(value) if isinstance(value, list) else [(None, value)]):
                if (isinstance(child, ast.Constant) and id(child) not in parts and isinstance(child.value, (str, int))
                        and not isinstance(child.value, bool)):
                    found.append((child, parent, field, index))
                elif (isinstance(parent, ast.Call) and field == "args"
                      and isinstance(child, (ast.Name, ast.Attribute, ast.Subscript))):
                    found.append((child, parent, field, index))
    return sorted(found, key=lambda f: (f[0].lineno, f[0].col_offset, f[0].end_lineno, f[0].end_col_offset,
                                        type(f[0]).__name__))


def _calls(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Call) for n in ast.walk(node))



def _helper(name: str, path: str) -> str:
    """A module-level function that appends `repr((key, params, ok, value, changed))` to `path`:
    params is the parameter part of the running test's id, ok says the repr reads back as the
    same literal."""
    return (f"def {name}(k, x, z):\n"
            f"    import os\n\n"
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
            f"    here = os.environ.get('PYTEST_CURRENT_TEST', '').rsplit(' (', 1)[0].rsplit('::', 1)[-1]\n"
            f"    params = here[here.index('['):] if '[' in here else ''\n"
            f"    ok = plain(x)\n"
            f"    with open({path!r}, 'a', encoding='utf-8') as f:\n"
            f"        f.write(repr((k, params, ok, x if ok else None, z)) + '\\n')")

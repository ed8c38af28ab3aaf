"""The rule for test modules that import a deleted name.

In: pytest's collection errors (node id -> error text) and the names a deletion removed. Out:
the test modules whose collection fails *only* because they import a deleted name, or the first
error that is anything else. The rule (README, verify.py): a test module whose collection error
is an `ImportError` (`cannot import name 'x'`, `No module named 'pkg.x'`) or an `AttributeError`
(`has no attribute 'x'`) naming a deleted name is allowed; its baseline-passing tests are not
collected in the start state, so they fail there ("missing"), and they become fail-to-pass
candidates like any other failing test. Every other collection error (a conftest, a name that was
not deleted, a syntax error, two exception lines that disagree) still rejects the deletion: the
learner would face a broken suite, not a missing feature.
"""

from __future__ import annotations

import re

from featdel.code.spans import is_test_path, parse, symbols

# The last exception line pytest prints for a module that failed at import.
_NAMED = (
    re.compile(r"^E?\s*(?:ImportError|ModuleNotFoundError): cannot import name '([\w.]+)'"),
    re.compile(r"^E?\s*ModuleNotFoundError: No module named '([\w.]+)'"),
    re.compile(r"^E?\s*AttributeError: .*has no attribute '(\w+)'"),
)
_EXCEPTION = re.compile(r"^E?\s*[\w.]*(?:Error|Exception|Exit)\b:?")


def deleted_names(read, edits: dict[str, str | None], module_of) -> set[str]:
    """Names the edits remove: a definition's last qualname part that no longer exists in its
    file, a re-exported or aliased name no longer bound there, and the dotted module of a removed
    file. `read(rel)` gives original bytes; `module_of(rel)` the dotted module name or None."""
    out: set[str] = set()
    for rel, text in edits.items():
        if text is None:
            mod = module_of(rel)
            if mod:
                out |= {mod, mod.rpartition(".")[2]}
            continue
        before = {s.qualname for s in symbols(read(rel), rel)}
        after = {s.qualname for s in symbols(text.encode(), rel)}
        out |= {q.rpartition(".")[2] for q in before - after}
        out |= _bound(read(rel).decode("utf-8", "replace")) - _bound(text)
    return out


def _bound(text: str) -> set[str]:
    """Names a module binds at its top level by import (`import a`, `from m import a`,
    `... as a`) or by plain assignment (`a = ...`)."""
    out: set[str] = set()
    for stmt in parse(text.encode()).root_node.named_children:
        if stmt.type in ("import_statement", "import_from_statement"):
            for child in stmt.children_by_field_name("name"):
                node = child.child_by_field_name("alias") if child.type == "aliased_import" else child
                out.add(node.text.decode().split(".")[0])
        elif stmt.type == "expression_statement" and stmt.named_child_count == 1:
            expr = stmt.named_children[0]
            left = expr.child_by_field_name("left") if expr.type == "assignment" else None
            if left is not None and left.type == "identifier":
                out.add(left.text.decode())
    return out


def named(message: str) -> str | None:
    """The one name a collection error is about, or None when it is about something else."""
    lines = [ln.strip() for ln in message.splitlines() if _EXCEPTION.match(ln.strip())]
    if not lines:
        return None
    last = lines[-1]
    for pattern in _NAMED:
        m = pattern.match(last)
        if m:
            return m.group(1)
    return None


def allowed(messages: dict[str, str], names: set[str]) -> tuple[set[str], str | None]:
    """(test modules allowed to fail collection, the first error that rejects or None)."""
    ok: set[str] = set()
    for nodeid, message in sorted(messages.items()):
        name = named(message)
        path = nodeid.split("::")[0]
        hit = name is not None and (name in names or name.rpartition(".")[2] in names)
        if not (hit and path.endswith(".py") and is_test_path(path) and path.rsplit("/", 1)[-1] != "conftest.py"):
            why = (message.strip().splitlines() or ["error"])[-1].strip()[:160]
            return ok, f"{nodeid or '<session>'}: {why}"
        ok.add(path)
    return ok, None

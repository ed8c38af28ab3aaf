"""Where a copy of a Python test goes in its file: its name, its node id, the lines that place it.

Shared by the canaries (featdel.grading.canaries) and the held-out variants
(featdel.grading.held_out), which both add copies of F2P test functions to the task's test
files: a copy is named after its test with a random suffix, so the repository's collection
patterns still match (`test_x` -> `test_x_t<hex>`, `x_test` -> `t<hex>_x_test`), and a method's
copy is set on its class.
"""

from __future__ import annotations

import ast
from pathlib import Path


def parsed(tree: Path, rel: str) -> tuple[str, ast.Module] | None:
    """The text and syntax tree of the Python test file `rel` under `tree`, or None where it is
    not a plain `.py` file or does not parse (no copy goes into it)."""
    path = tree / rel
    if not rel.endswith(".py") or not path.is_file() or path.is_symlink():
        return None
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        return source, ast.parse(source)
    except SyntaxError:
        return None


def placed(text: str, name: str, owner: list[str], token) -> list[str]:
    """The lines that put the function `text` (named `name`) where pytest collects it: at module
    level, or set on its class `owner` under a hidden module-level name that is then deleted."""
    if not owner:
        return [text]
    hidden = f"_{copy_name(name, token(4))}"
    return [text.replace(f"def {name}(", f"def {hidden}(", 1), f"{'.'.join(owner + [name])} = {hidden}", f"del {hidden}"]


def copy_name(original: str, tok: str) -> str:
    """A copy's name that pytest collects wherever it collects `original`: it keeps a `test`
    prefix (pytest's default, unittest's loader) and a `test` suffix (a `*_test` config) alike,
    so `test_latest` becomes `test_tTOK_latest`, not a name no collector takes."""
    if original.startswith("test"):
        return f"test_t{tok}_{original[4:]}"
    return f"t{tok}_{original}" if original.lower().endswith("test") else f"{original}_t{tok}"


def uncopyable(name: str) -> bool:
    """unittest's `runTest` is collected only from a class with no `test*` method: no copy of it
    beside it is ever collected, and a `test*` copy would stop the original being collected."""
    return name == "runTest"


def node_id(rel: str, owner: list[str], name: str, params: str) -> str:
    return "::".join([rel, *owner, name]) + params


def locate(module: ast.Module, node: str):
    """(class path, function node, parameter suffix) of a node id in `module`, or None."""
    parts = node.split("::")[1:]
    if not parts:
        return None
    last = parts[-1]
    name, _, rest = last.partition("[")
    params = f"[{rest}" if rest else ""
    body, owner = module.body, []
    for cls in parts[:-1]:
        match = next((n for n in body if isinstance(n, ast.ClassDef) and n.name == cls), None)
        if match is None:
            return None
        body, owner = match.body, owner + [cls]
    fn = next((n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name), None)
    return None if fn is None else (owner, fn, params)


def is_literal(node: ast.AST) -> bool:
    """Is `node` a literal (`ast.literal_eval` reads it): the expected side of an assertion."""
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True

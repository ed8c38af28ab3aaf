"""The problem statement a learner reads, written from what a user of the code would need.

In: the deletion (which symbols), the original tree (their signatures and docstrings, read with
tree-sitter), and the fail-to-pass tests. Out: Markdown. It never quotes a deleted body: only
module paths, each symbol as it is declared (the headers of its enclosing classes, its
decorators, its signature, the docstring when the task keeps docstrings; a deleted class with the
declarations of its methods inside it), and the test ids. The leak audit runs on the result too.
A deletion that brings its own statement (`Deletion.statement`, written by the `agent`
strategy's model) gets that text followed by the test ids; the leak audit judges it the same way.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from featdel.code.spans import Symbol, parse, symbols
from featdel.core.records import Deletion
from featdel.deletion.splice import statement_node


def _module(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def write(deletion: Deletion, original: Path, fail_to_pass: list[str], *, max_tests: int = 20) -> str:
    if deletion.statement:  # the deletion came with its own text (the `agent` strategy's model wrote it)
        return "\n".join([deletion.statement.strip(), "", *_tests(fail_to_pass, max_tests)]) + "\n"
    by_file: dict[str, list[str]] = {}
    for ref in deletion.deleted_symbols:
        path, _, qualname = ref.partition("::")
        by_file.setdefault(path, []).append(qualname)
    stubbed = set(deletion.stubbed_symbols)
    lines = ["A feature of this repository is missing, and its tests fail.", ""]
    if deletion.strategy == "file":
        gone = [p for p, text in deletion.files.items() if text is None]
        lines += [f"The module `{_module(p)}` (`{p}`) has been removed; restore it." for p in gone] + [""]
    lines.append("Implement the following so that the failing tests pass:")
    lines.append("")
    for path, qualnames in sorted(by_file.items()):
        source = (original / path).read_bytes()
        tree = parse(source)
        known: dict[str, list[Symbol]] = {}
        for sym in symbols(source, path):
            known.setdefault(sym.qualname, []).append(sym)
        lines.append(f"In `{path}` (module `{_module(path)}`):")
        lines.append("")
        for qualname in qualnames:
            if qualname not in known or _within_deleted(qualname, qualnames):
                continue  # a method of a deleted class is shown inside the class
            sym = known[qualname][0]
            where = "its body is a stub" if f"{path}::{qualname}" in stubbed else "it has been removed"
            lines.append(f"- `{qualname}` ({sym.kind}; {where}):")
            lines.append("")
            lines.append("  ```python")
            for i, outer in enumerate(qualname.split(".")[:-1]):
                cls = known.get(".".join(qualname.split(".")[: i + 1]), [])
                lines.append("  " + "    " * i + (cls[0].signature if cls else f"class {outer}:"))
            shown = [s for q in qualnames if q == qualname or q.startswith(qualname + ".") for s in known.get(q, [])]
            for s in sorted(set(shown), key=lambda s: s.start_byte):
                lines += _declaration(source, tree, s, s.qualname.count("."), deletion.keep_docstrings)
            lines.append("  ```")
            lines.append("")
    return "\n".join(lines + _tests(fail_to_pass, max_tests)) + "\n"


def _tests(fail_to_pass: list[str], max_tests: int) -> list[str]:
    shown_tests = fail_to_pass[:max_tests]
    lines = ["These tests must pass (run them with pytest):", ""]
    lines += [f"- `{t}`" for t in shown_tests]
    if len(fail_to_pass) > len(shown_tests):
        lines.append(f"- ... and {len(fail_to_pass) - len(shown_tests)} more")
    return lines + ["", "Other tests must keep passing. Do not edit the tests or the test configuration."]


def _within_deleted(qualname: str, qualnames: list[str]) -> bool:
    parts = qualname.split(".")
    return any(".".join(parts[:i]) in qualnames for i in range(1, len(parts)))


def _declaration(source: bytes, tree, sym: Symbol, depth: int, keep_docstring: bool) -> list[str]:
    """Decorators, signature and (when kept) docstring of one definition, at its nesting depth,
    inside a Markdown list item's code block. Never a line of the body."""
    pad = "  " + "    " * depth
    node = statement_node(tree, sym)
    decorators = [c.text.decode() for c in node.children if c.type == "decorator"]
    out = [pad + " ".join(d.split()) for d in decorators] + [pad + sym.signature]
    if keep_docstring and sym.docstring:
        first, *rest = sym.docstring.splitlines()
        body = [first.strip()] + textwrap.dedent("\n".join(rest)).splitlines()
        out += [pad + "    " + ln if ln.strip() else "" for ln in body]
    return out

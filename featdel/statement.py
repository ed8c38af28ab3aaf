"""The problem statement a learner reads, written from what a user of the code would need.

In: the deletion (which symbols), the original tree (their signatures and docstrings, read with
tree-sitter), and the fail-to-pass tests. Out: Markdown. It never quotes a deleted body: only
module paths, signatures, the docstring when the task keeps docstrings, and the test ids. The
leak audit runs on the result as well.
"""

from __future__ import annotations

from pathlib import Path

from featdel.records import Deletion
from featdel.spans import symbols


def _module(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    if parts[0] == "src":
        parts = parts[1:]
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def write(deletion: Deletion, original: Path, fail_to_pass: list[str], *, max_tests: int = 20) -> str:
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
        known = {s.qualname: s for s in symbols(source, path)}
        lines.append(f"In `{path}` (module `{_module(path)}`):")
        lines.append("")
        for qualname in qualnames:
            sym = known.get(qualname)
            if sym is None:
                continue
            where = "its body is a stub" if f"{path}::{qualname}" in stubbed else "it has been removed"
            lines.append(f"- `{qualname}` ({sym.kind}; {where}):")
            lines.append("")
            lines.append("  ```python")
            lines.append(f"  {sym.signature}")
            if deletion.keep_docstrings and sym.docstring:
                lines += [f"      {ln.strip()}" if ln.strip() else "" for ln in sym.docstring.splitlines()]
            lines.append("  ```")
            lines.append("")
    shown = fail_to_pass[:max_tests]
    lines.append("These tests must pass (run them with pytest):")
    lines.append("")
    lines += [f"- `{t}`" for t in shown]
    if len(fail_to_pass) > len(shown):
        lines.append(f"- ... and {len(fail_to_pass) - len(shown)} more")
    lines += ["", "Other tests must keep passing. Do not edit the tests or the test configuration."]
    return "\n".join(lines) + "\n"

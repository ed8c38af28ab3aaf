"""Difficulty features of a task, for the curriculum: size, spread, branching and centrality.

In: the deletion, the start state, and the F2P/P2P lists. Out: a flat dict matching the
`difficulty` struct of the task schema. Cyclomatic complexity counts decision points in the
deleted code (tree-sitter nodes) plus one per deleted callable; references counts how often the
deleted names still occur as identifiers in the start state (a cheap call-graph in-degree);
similarity is `quality.similarity` of the deleted code to what the start state still holds (1.0:
a renamed copy is left next door).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from featdel.code.spans import parse, python_files
from featdel.core.records import Deletion
from featdel.deletion.quality import similarity

_DECISIONS = {"if_statement", "elif_clause", "for_statement", "while_statement", "except_clause",
              "with_statement", "boolean_operator", "conditional_expression", "for_in_clause",
              "if_clause", "match_statement", "case_clause", "assert_statement"}
_CALLABLES = {"function_definition"}


def _count(node, kinds: set[str]) -> int:
    total = 1 if node.type in kinds else 0
    return total + sum(_count(c, kinds) for c in node.children)


def cyclomatic(snippets: list[str]) -> int:
    total = 0
    for snippet in snippets:
        root = parse(textwrap.dedent(snippet).encode()).root_node
        total += _count(root, _DECISIONS) + max(1, _count(root, _CALLABLES))
    return total


def references(names: set[str], start: Path) -> int:
    if not names:
        return 0
    count = 0
    for path in python_files(start):
        stack = [parse(path.read_bytes()).root_node]
        while stack:
            node = stack.pop()
            if node.type == "identifier" and node.text.decode() in names:
                count += 1
            stack.extend(node.children)
    return count


def features(deletion: Deletion, start: Path, fail_to_pass: list[str], pass_to_pass: list[str], *,
             similar: float | None = None) -> dict:
    """`similar`: the similarity verification measured on this start state (the verdict's), so
    packaging does not measure it again; None measures it."""
    names = {ref.rpartition("::")[2].rsplit(".", 1)[-1] for ref in deletion.deleted_symbols}
    if similar is None:
        similar = similarity(deletion.removed, start, exclude=set(deletion.deleted_symbols)).score
    return {
        "deleted_lines": sum(len(s.splitlines()) for s in deletion.removed),
        "deleted_symbols": len(deletion.deleted_symbols),
        "files": len(deletion.files),
        "cyclomatic": cyclomatic(deletion.removed),
        "fail_to_pass": len(fail_to_pass),
        "pass_to_pass": len(pass_to_pass),
        "references": references(names, start),
        "similarity": similar,
        "docstrings_kept": deletion.keep_docstrings,
        "tests_visible": True,
    }

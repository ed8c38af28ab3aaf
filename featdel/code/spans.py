"""Symbol spans of Python source, from tree-sitter (official `tree-sitter-python` grammar).

In: a file's bytes. Out: `Symbol` records for every module-level function, class and method
(nested classes' methods too), with line and byte ranges. Used by the coverage map (which tests
execute which symbol) and by the deletion strategies (what to cut). Functions nested inside
functions are part of their outer function, never symbols of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Symbol:
    path: str  # relative to the repository root, POSIX
    qualname: str  # "func", "Class", "Class.method", "Outer.Inner.method"
    kind: str  # "function" | "class" | "method"
    start_line: int  # 1-based, decorators included
    end_line: int  # 1-based, inclusive
    def_line: int  # the line of `def`/`class`
    body_start_line: int  # first line of the body (the docstring when there is one)
    start_byte: int  # decorators included
    end_byte: int
    body_start_byte: int  # first statement of the body
    docstring: str | None  # the literal text of the docstring statement, quotes included
    signature: str  # the header from `def`/`class` to the colon, one line

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def is_dunder(self) -> bool:
        return self.name.startswith("__") and self.name.endswith("__")

    @property
    def lines(self) -> int:
        return self.end_line - self.start_line + 1


@cache
def _parser():
    import tree_sitter_python
    from tree_sitter import Language, Parser

    return Parser(Language(tree_sitter_python.language()))


@lru_cache(maxsize=512)
def parse(source: bytes):
    """The tree-sitter tree of `source`. Kept for the next call with the same bytes: the
    gates, the leak audit, the statement and the difficulty features of every candidate of a
    repository parse the same original files again (callers only read a tree; none edits one)."""
    return _parser().parse(source)


def has_syntax_error(source: bytes) -> bool:
    return parse(source).root_node.has_error


def symbols(source: bytes, path: str) -> list[Symbol]:
    """All functions, classes and methods of one file, in source order."""
    out: list[Symbol] = []
    _walk(parse(source).root_node, source, path, prefix="", in_class=False, out=out)
    return out


def _walk(node, source: bytes, path: str, *, prefix: str, in_class: bool, out: list[Symbol]):
    for child in node.named_children:
        outer, definition = child, child
        if child.type == "decorated_definition":
            definition = child.child_by_field_name("definition")
        if definition is None or definition.type not in ("function_definition", "class_definition"):
            continue
        name = definition.child_by_field_name("name").text.decode()
        qualname = f"{prefix}{name}"
        body = definition.child_by_field_name("body")
        is_class = definition.type == "class_definition"
        kind = "class" if is_class else ("method" if in_class else "function")
        out.append(_symbol(outer, definition, body, source, path, qualname, kind))
        if is_class:
            _walk(body, source, path, prefix=f"{qualname}.", in_class=True, out=out)


def _symbol(outer, definition, body, source: bytes, path: str, qualname: str, kind: str) -> Symbol:
    first = body.named_children[0] if body.named_children else body
    docstring = None
    if first.type == "expression_statement" and first.named_children:
        if first.named_children[0].type == "string":
            docstring = first.text.decode()
    header = source[definition.start_byte : body.start_byte].decode()
    signature = " ".join(header.split()).rstrip(":").rstrip() + ":"
    return Symbol(
        path=path,
        qualname=qualname,
        kind=kind,
        start_line=outer.start_point[0] + 1,
        end_line=outer.end_point[0] + 1,
        def_line=definition.start_point[0] + 1,
        body_start_line=first.start_point[0] + 1,
        start_byte=outer.start_byte,
        end_byte=outer.end_byte,
        body_start_byte=first.start_byte,
        docstring=docstring,
        signature=signature,
    )


def python_files(root: Path) -> list[Path]:
    """Python files of a tree, skipping VCS, virtualenvs and caches; sorted for determinism."""
    skip = {".git", ".venv", "venv", "__pycache__", ".tox", ".nox", "build", "dist", "node_modules"}
    found = []
    for p in root.rglob("*.py"):
        rel = p.relative_to(root).parts
        if any(part in skip or part.endswith(".egg-info") for part in rel[:-1]):
            continue
        found.append(p)
    return sorted(found)


# Test files of the other languages' runners (featdel.lang): their ids are never doctests.
SCRIPT_TEST_SUFFIXES = (".js", ".mjs", ".cjs", ".jsx", ".ts", ".mts", ".cts", ".tsx")


def is_doctest(test_id: str) -> bool:
    """A pytest doctest item (`pkg/mod.py::pkg.mod.func`, `README.rst::README.rst`): its examples
    and their expected output live in a source or text file, not in a test module. A test
    function's name holds no dot (a parametrize id in brackets may)."""
    path, sep, name = test_id.partition("::")
    if path.endswith(SCRIPT_TEST_SUFFIXES):  # a JavaScript runner's id: file::title::title
        return False
    return bool(sep) and ("." in name.split("[", 1)[0] or not path.endswith(".py"))


def is_test_path(rel: str) -> bool:
    """Test code by the usual conventions: never a deletion target."""
    parts = rel.split("/")
    name = parts[-1]
    return (
        any(p in ("tests", "test", "testing") for p in parts[:-1])
        or name.startswith("test_")
        or name.endswith("_test.py")
        or name == "conftest.py"
    )

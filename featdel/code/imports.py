"""Import statements of a Python file, resolved to absolute module names.

In: the tree's relative paths and one file's tree-sitter tree. Out: `ImportRef`s saying which
modules a statement may load, which plain names a `from` import binds, and whether it runs at
import time (outside any function). The `file` strategy uses them to refuse a module other code
imports at top level; the `feature` strategy to drop a removed helper's name from a `from` import.
Resolution is by file layout only (`__init__.py` chains, `src/` skipped because it has none), never
by importing anything.
"""

from __future__ import annotations

from dataclasses import dataclass


def module_name(rel: str, paths: set[str]) -> str | None:
    """Dotted name of a file from the chain of `__init__.py` above it ("src/pkg/a.py" -> "pkg.a")."""
    if not rel.endswith(".py"):
        return None
    parts = rel[:-3].split("/")
    dirs, stem = parts[:-1], parts[-1]
    names = [] if stem == "__init__" else [stem]
    while dirs and "/".join([*dirs, "__init__.py"]) in paths:
        names.insert(0, dirs[-1])
        dirs = dirs[:-1]
    return ".".join(names) or None


def package_of(rel: str, module: str) -> str:
    return module if rel.endswith("__init__.py") else module.rpartition(".")[0]


@dataclass(frozen=True, slots=True)
class ImportRef:
    node: object  # the import statement
    modules: tuple[str, ...]  # every module the statement may load (a from-import's names too)
    source_module: str  # "x" of `from x import ...`; the dotted name for `import x`
    names: tuple[tuple[str, object], ...]  # (bound name, node) of a from-import's plain names
    aliased: tuple[str, ...]  # names imported under an alias
    top_level: bool  # runs at import time (not inside a function)


def _resolve(node, package: str | None) -> str | None:
    """Absolute module of a `from` statement's module part, or None if it climbs too far."""
    if node.type != "relative_import":
        return node.text.decode()
    dots = sum(len(c.text) for c in node.children if c.type == "import_prefix")
    rest = "".join(c.text.decode() for c in node.children if c.type == "dotted_name")
    if package is None:
        return None
    parts = package.split(".") if package else []
    if dots - 1 > len(parts):
        return None
    base = parts[: len(parts) - (dots - 1)]
    return ".".join([*base, rest] if rest else base)


def _top_level(node) -> bool:
    parent = node.parent
    while parent is not None:
        if parent.type in ("function_definition", "lambda"):
            return False
        parent = parent.parent
    return True


def imports_of(tree, rel: str, paths: set[str]) -> list[ImportRef]:
    module = module_name(rel, paths)
    package = package_of(rel, module) if module else None
    found = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type == "import_statement":
            mods, aliased = [], []
            for child in node.named_children:
                if child.type == "aliased_import":
                    mods.append(child.child_by_field_name("name").text.decode())
                    aliased.append(mods[-1])
                elif child.type == "dotted_name":
                    mods.append(child.text.decode())
            found.append(ImportRef(node, tuple(mods), ",".join(mods), (), tuple(aliased), _top_level(node)))
            continue
        if node.type == "import_from_statement":
            base = _resolve(node.child_by_field_name("module_name"), package)
            if base is None:
                continue
            names, aliased = [], []
            for child in node.children_by_field_name("name"):
                if child.type == "aliased_import":
                    aliased.append(child.child_by_field_name("name").text.decode())
                else:
                    names.append((child.text.decode(), child))
            subs = [f"{base}.{n}" if base else n for n in [*(n for n, _ in names), *aliased]]
            found.append(ImportRef(node, (base, *subs), base, tuple(names), tuple(aliased), _top_level(node)))
            continue
        stack.extend(node.named_children)
    return sorted(found, key=lambda r: r.node.start_byte)


def loads(ref: ImportRef, module: str) -> bool:
    """Whether executing the statement imports `module` (or one of its submodules)."""
    return any(m == module or m.startswith(module + ".") for m in ref.modules)


class _OnDisk:
    """`rel in paths` for the files of the tree at `root`, answered by the file system."""

    def __init__(self, root) -> None:
        self.root = root

    def __contains__(self, rel: str) -> bool:
        return (self.root / rel).is_file()


def imported_test_files(root, rels) -> set[str]:
    """Test files of the tree at `root` that the test files `rels` import, directly or through one
    another (`from test_base import Base`, `from .helpers import check`): where a collected test's
    function may come from, as when a class inherits the tests of another file's class. By file
    layout: a module is looked for from the tree's root and from each folder above the importing
    file, where pytest's rootdir-relative imports find it."""
    from pathlib import PurePosixPath

    from featdel.code.spans import is_test_path, parse

    paths = _OnDisk(root)  # a grading runs this: asked about a few paths, the tree is not walked
    found: set[str] = set()
    todo = [rel for rel in rels if rel in paths]
    while todo:
        rel = todo.pop()
        try:
            refs = imports_of(parse((root / rel).read_bytes()), rel, paths)
        except OSError:
            continue
        folders = ["" if str(p) == "." else f"{p}/" for p in PurePosixPath(rel).parents]  # the root last
        for module in {m for ref in refs for m in ref.modules}:
            stem = module.replace(".", "/")
            for folder in folders:
                for cand in (f"{folder}{stem}.py", f"{folder}{stem}/__init__.py"):
                    if cand in paths and is_test_path(cand) and cand not in found and cand not in rels:
                        found.add(cand)
                        todo.append(cand)
    return found

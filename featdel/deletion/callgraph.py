"""Name-level call graph: which helpers are used only by one feature.

In: the read-only tree, the feature's definitions and the private helpers it could take. Out: the
helpers (in source order) whose every reference lies inside the feature or inside helpers already
taken, found by fixpoint. References are tree-sitter identifiers (attribute names included, so
`self._h` and `mod._h` count) and string literals spelled exactly like the name (`__all__`,
`getattr(obj, "_h")`), across every Python file, tests included: a helper a test calls directly
is not only the feature's, so it stays. A public module-level function or class is a helper too
when no other source code names it: tests of it may (they fail with the feature, and become F2P),
and so may `__all__` strings and re-exports, which the strategy removes as wiring. Names, not scopes: two helpers that share a name hide each
other, which errs on keeping code. The one reference allowed outside the set is a plain
`from <helper's module> import _h` in a source file, which the strategy then edits.
"""

from __future__ import annotations

from dataclasses import dataclass

from featdel.code.imports import imports_of, module_name
from featdel.code.spans import Symbol, is_test_path
from featdel.deletion.base import Tree


@dataclass(frozen=True, slots=True)
class Occurrence:
    path: str
    byte: int
    kind: str  # "name" | "string" | "import" (a plain from-import name) | "import-other"
    source_module: str = ""  # for "import": the module the name is imported from


@dataclass(frozen=True, slots=True)
class Helper:
    path: str
    qualname: str
    defs: tuple[Symbol, ...]
    public: bool = False  # a public module-level name: tests may use it (they then fail too)

    @property
    def name(self) -> str:
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def key(self) -> str:
        return f"{self.path}::{self.qualname}"


def helpers_for(tree: Tree, path: str, qualname: str, kind: str) -> list[Helper]:
    """Private module-level functions and classes of every source file, and private methods of the
    feature's own class when the feature is a method."""
    cls = qualname.rpartition(".")[0] if kind == "method" else None
    groups: dict[tuple[str, str], list[Symbol]] = {}
    for rel in tree.source_paths():
        for s in tree.symbols(rel):
            if not s.name.startswith("_") or s.is_dunder:
                continue
            top = s.kind in ("function", "class") and "." not in s.qualname
            own = cls is not None and rel == path and s.kind == "method" and s.qualname == f"{cls}.{s.name}"
            if top or own:
                groups.setdefault((rel, s.qualname), []).append(s)
    return [Helper(rel, q, tuple(defs)) for (rel, q), defs in sorted(groups.items())]


def public_helpers(tree: Tree, path: str, qualname: str) -> list[Helper]:
    """Public module-level functions and classes of every source file but the feature itself."""
    groups: dict[tuple[str, str], list[Symbol]] = {}
    for rel in tree.source_paths():
        for s in tree.symbols(rel):
            if s.kind in ("function", "class") and "." not in s.qualname and not s.name.startswith("_") \
                    and (rel, s.qualname) != (path, qualname):
                groups.setdefault((rel, s.qualname), []).append(s)
    return [Helper(rel, q, tuple(defs), public=True) for (rel, q), defs in sorted(groups.items())]


def occurrences(tree: Tree) -> dict[str, list[Occurrence]]:
    """Every occurrence of every private name (`_x`, not dunders) and of every public
    module-level definition's name in the tree, once per tree."""
    def build():
        names = {s.name for rel in tree.source_paths() for s in tree.symbols(rel) if "." not in s.qualname}
        return _index(tree, lambda text: _private(text) or text in names)

    return tree.memo("occurrences", build)


def _private(text: str) -> bool:
    return text.startswith("_") and text != "_" and not (text.startswith("__") and text.endswith("__"))


def _index(tree: Tree, wanted) -> dict[str, list[Occurrence]]:
    out: dict[str, list[Occurrence]] = {}
    for rel in tree.paths():
        froms = {}
        for ref in file_imports(tree, rel):
            for _, node in ref.names:
                froms[node.start_byte] = ref.source_module
        stack = [tree.tree(rel).root_node]
        while stack:
            node = stack.pop()
            if node.type in ("identifier", "string_content"):
                text = node.text.decode()
                if wanted(text):
                    out.setdefault(text, []).append(_occurrence(rel, node, froms))
                continue
            stack.extend(node.children)
    for occ in out.values():
        occ.sort(key=lambda o: (o.path, o.byte))
    return out


def file_imports(tree: Tree, rel: str) -> list:
    """`imports_of` one file, once per tree."""
    return tree.memo(f"imports:{rel}", lambda: imports_of(tree.tree(rel), rel, set(tree.paths())))


def _occurrence(rel: str, node, froms: dict[int, str]) -> Occurrence:
    if node.type == "string_content":
        return Occurrence(rel, node.start_byte, "string")
    parent = node.parent
    while parent is not None and parent.type not in ("import_statement", "import_from_statement"):
        if parent.type in ("block", "module", "expression_statement"):
            return Occurrence(rel, node.start_byte, "name")
        parent = parent.parent
    if parent is None:
        return Occurrence(rel, node.start_byte, "name")
    dotted = node.parent
    if dotted.type == "dotted_name" and dotted.start_byte in froms and dotted.named_child_count == 1:
        return Occurrence(rel, node.start_byte, "import", froms[dotted.start_byte])
    return Occurrence(rel, node.start_byte, "import-other")


def _inside(o: Occurrence, spans: list[tuple[str, int, int]]) -> bool:
    return any(o.path == p and s <= o.byte < e for p, s, e in spans)


def only_used_by(tree: Tree, feature: list[Symbol], candidates: list[Helper]) -> list[Helper]:
    """The helpers used by `feature` and by nothing else outside the set, by fixpoint."""
    occ = occurrences(tree)
    paths = set(tree.paths())
    taken: list[Helper] = []
    spans = [(s.path, s.start_byte, s.end_byte) for s in feature]
    changed = True
    while changed:
        changed = False
        for h in candidates:
            if h in taken:
                continue
            own = [(d.path, d.start_byte, d.end_byte) for d in h.defs]
            home = module_name(h.path, paths)
            used = False
            for o in occ.get(h.name, []):
                if _inside(o, own):
                    continue
                if _inside(o, spans):
                    used = True
                elif h.public and (is_test_path(o.path) or o.kind in ("string", "import")):
                    continue  # a test of it (it fails too), `__all__`, a re-export: wiring goes with it
                elif not (o.kind == "import" and not is_test_path(o.path) and o.source_module == home):
                    break
            else:
                if used:
                    taken.append(h)
                    spans += own
                    changed = True
    return sorted(taken, key=lambda h: (h.path, h.defs[0].start_byte))

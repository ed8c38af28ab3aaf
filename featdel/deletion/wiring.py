"""What wires a name into a package, found so a deletion can take it out too, and the edit plan.

In: the read-only tree, the file that defines a name, and the name (a method: its class too).
Out: a `Wiring` (plain from-imports of it in source files, followed through re-exports such as
`pkg/__init__.py`; `__all__` entries; aliases `other = name`; registry entries `{"k": name}`,
`REG["k"] = name`, `register(name)`), and `Plan`, which renders a set of cuts across files from
the original bytes every time, so steps compose and roll back by simply not being kept.
A module that imports the name and also uses it is not wiring: its import stays. Anything wired
in some other way (an aliased import, a star import, `getattr`) is not found either: the caller's
check then fails and the step is rolled back, which errs on keeping code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from featdel.code.imports import module_name
from featdel.deletion.base import Tree, decode
from featdel.deletion.callgraph import file_imports
from featdel.deletion.splice import Splice, apply, removal


@dataclass
class FilePlan:
    """What is cut from one file so far."""

    nodes: list = field(default_factory=list)  # statements removed whole
    drops: dict[int, set[int]] = field(default_factory=dict)  # from-import byte -> dropped names
    stubs: list[Splice] = field(default_factory=list)  # any other splice (stubs)
    elements: dict[int, tuple[object, set[int]]] = field(default_factory=dict)  # container byte -> cut items

    def copy(self) -> FilePlan:
        return FilePlan(list(self.nodes), {k: set(v) for k, v in self.drops.items()}, list(self.stubs),
                        {k: (n, set(i)) for k, (n, i) in self.elements.items()})


def _name_splices(stmt, dropped: set[int]) -> list[Splice]:
    """Splices dropping some names of a from-import that keeps at least one."""
    names = list(stmt.children_by_field_name("name"))
    gone = [n.start_byte in dropped for n in names]
    tail = len(names)
    while tail > 0 and gone[tail - 1]:
        tail -= 1
    out = [Splice(n.start_byte, names[i + 1].start_byte, b"") for i, n in enumerate(names[:tail]) if gone[i]]
    if tail < len(names):
        out.append(Splice(names[tail - 1].end_byte, names[-1].end_byte, b""))
    return out


class Plan:
    def __init__(self, tree: Tree):
        self.tree = tree
        self.files: dict[str, FilePlan] = {}

    def render(self) -> dict[str, str | None]:
        edits: dict[str, str | None] = {}
        for rel, plan in sorted(self.files.items()):
            source, ts = self.tree.read(rel), self.tree.tree(rel)
            nodes, splices = list(plan.nodes), sorted(set(plan.stubs))
            for ref in file_imports(self.tree, rel):
                dropped = plan.drops.get(ref.node.start_byte)
                if not dropped:
                    continue
                if len(dropped) == len(list(ref.node.children_by_field_name("name"))):
                    nodes.append(ref.node)
                else:
                    splices += _name_splices(ref.node, dropped)
            for container, cut in plan.elements.values():
                splices += _element_splices(container, cut)
            splices += removal(source, ts, nodes) if nodes else []
            edits[rel] = decode(apply(source, splices))
        return edits

    def trial(self, change) -> tuple[Plan, dict[str, str | None]]:
        nxt = Plan(self.tree)
        nxt.files = {k: v.copy() for k, v in self.files.items()}
        change(nxt)
        return nxt, nxt.render()

    def file(self, rel: str) -> FilePlan:
        return self.files.setdefault(rel, FilePlan())


def _items(container) -> list:
    return [c for c in container.named_children if c.type != "comment"]


def _element_splices(container, cut: set[int]) -> list[Splice]:
    """Splices dropping items `cut` (indices) of a list, tuple or dict literal, keeping the
    rest's formatting; a tuple left with one item keeps a trailing comma."""
    items = _items(container)
    if len(cut) >= len(items):
        text = container.text.decode()
        return [Splice(container.start_byte, container.end_byte, (text[0] + text[-1]).encode())]
    out, i = [], 0
    while i < len(items):
        if i not in cut:
            i += 1
            continue
        j = i
        while j + 1 < len(items) and j + 1 in cut:
            j += 1
        if j + 1 < len(items):
            out.append(Splice(items[i].start_byte, items[j + 1].start_byte, b""))
        else:
            lone = container.type == "tuple" and len(items) - len(cut) == 1
            follows = container.text[items[j].end_byte - container.start_byte:].lstrip().startswith(b",")
            out.append(Splice(items[i - 1].end_byte, items[j].end_byte, b"," if lone and not follows else b""))
        i = j + 1
    return out


@dataclass
class Wiring:
    drops: list[tuple[str, int, int]] = field(default_factory=list)  # (path, import byte, name byte)
    nodes: list[tuple[str, object]] = field(default_factory=list)  # (path, statement removed whole)
    elements: list[tuple[str, object, int]] = field(default_factory=list)  # (path, container, item index)
    labels: list[str] = field(default_factory=list)  # "path::name (what)", for the record

    def add_to(self, plan: Plan) -> None:
        for rel, stmt, name in self.drops:
            plan.file(rel).drops.setdefault(stmt, set()).add(name)
        for rel, node in self.nodes:
            plan.file(rel).nodes.append(node)
        for rel, container, index in self.elements:
            plan.file(rel).elements.setdefault(container.start_byte, (container, set()))[1].add(index)

    def __bool__(self) -> bool:
        return bool(self.drops or self.nodes or self.elements)


def find(tree: Tree, home: str, name: str, cls: str | None = None) -> Wiring:
    """The wiring of `name` defined in `home` (a method of `cls` when given)."""
    out = Wiring()
    if cls is not None:
        for node in _class_blocks(tree, home, cls):
            _aliases(tree, home, node, name, out)
        return out
    paths = set(tree.paths())
    binders, queue = {home}, [module_name(home, paths)]
    while queue:
        module = queue.pop()
        for rel in tree.source_paths():
            if name.encode() not in tree.read(rel) or module is None:
                continue
            for ref in file_imports(tree, rel):
                if ref.source_module != module or not ref.top_level:
                    continue
                if _used(tree, rel, name):
                    continue  # code here calls it: not wiring, and the check will say so
                for node in ref.node.children_by_field_name("name"):
                    bound = node.text.decode() if node.type != "aliased_import" else \
                        node.child_by_field_name("name").text.decode()  # `name as alias` re-exports too
                    if bound == name and (rel, ref.node.start_byte, node.start_byte) not in out.drops:
                        out.drops.append((rel, ref.node.start_byte, node.start_byte))
                        out.labels.append(f"{rel}::{name} (import)")
                        if rel not in binders:
                            binders.add(rel)
                            queue.append(module_name(rel, paths))
    for rel in tree.source_paths():  # `name = curry(pkg.name)` wires it in without importing it
        if rel in binders or name.encode() in tree.read(rel):
            _aliases(tree, rel, tree.tree(rel).root_node, name, out, attributes=rel not in binders)
    for label in [lb for lb in out.labels if lb.endswith(" (alias)")]:  # an alias's `__all__` entry
        rel, _, alias = label.removesuffix(" (alias)").partition("::")
        if alias.isidentifier() and alias != name:
            _aliases(tree, rel, tree.tree(rel).root_node, alias, out, all_only=True)
    return out


def _used(tree: Tree, rel: str, name: str) -> bool:
    """Does `rel` name `name` anywhere but in import statements and plain aliases `x = name`?"""
    stack = [tree.tree(rel).root_node]
    while stack:
        node = stack.pop()
        if node.type in ("import_from_statement", "import_statement"):
            continue
        if node.type == "assignment" and _is(node.child_by_field_name("right"), name):
            continue
        if node.type == "identifier" and node.text.decode() == name:
            return True
        stack.extend(node.children)
    return False


def _class_blocks(tree: Tree, rel: str, cls: str) -> list:
    found = [s for s in tree.find(rel, cls) if s.kind == "class"]
    root = tree.tree(rel).root_node
    blocks = []
    for s in found:
        node = root.descendant_for_byte_range(s.start_byte, s.end_byte)
        while node is not None and node.type != "class_definition":
            node = node.parent if node.type != "decorated_definition" else node.child_by_field_name("definition")
        if node is not None and node.child_by_field_name("body") is not None:
            blocks.append(node.child_by_field_name("body"))
    return blocks


def _refers(node, name: str, attributes: bool) -> bool:
    """`name`, `pkg.name` (with `attributes`), or a call of anything on such arguments."""
    if node is None:
        return False
    if node.type == "identifier":
        return node.text.decode() == name and not attributes
    if node.type == "attribute":
        return _is(node.child_by_field_name("attribute"), name) and attributes
    if node.type == "call":
        args = node.child_by_field_name("arguments")
        return args is not None and any(_refers(a, name, attributes) for a in args.named_children)
    return False


def _aliases(tree: Tree, rel: str, block, name: str, out: Wiring, attributes: bool = False,
             all_only: bool = False) -> None:
    """Statements of `block` (a module or class body) that wire `name` in; with `attributes`,
    only those reaching it as `pkg.name` (a module that never imports it)."""
    for stmt in block.named_children:
        if stmt.type != "expression_statement" or stmt.named_child_count != 1:
            continue
        expr = stmt.named_children[0]
        if expr.type == "assignment" or expr.type == "augmented_assignment":
            left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
            if right is None:
                continue
            target = left.text.decode() if left is not None else ""
            if attributes:
                if left is not None and left.type == "identifier" and _refers(right, name, True):
                    out.nodes.append((rel, stmt))
                    out.labels.append(f"{rel}::{target} (alias)")
                continue
            if target == "__all__" and right.type in ("list", "tuple"):
                _elements(rel, right, lambda e: e.type == "string" and _string(e) == name, out, "__all__")
            elif all_only:
                continue
            elif _refers(right, name, False) and left is not None and \
                    left.type in ("identifier", "subscript", "attribute"):
                out.nodes.append((rel, stmt))
                out.labels.append(f"{rel}::{target} (alias)")
            elif right.type == "dictionary":
                _elements(rel, right, lambda e: e.type == "pair" and _is(e.child_by_field_name("value"), name),
                          out, f"{target} entry")
        elif expr.type == "call" and not attributes and not all_only:
            args = expr.child_by_field_name("arguments")
            fn = expr.child_by_field_name("function")
            if fn is not None and fn.text.decode() == "__all__.extend" and args is not None and args.named_children:
                _elements(rel, args.named_children[0], lambda e: e.type == "string" and _string(e) == name, out,
                          "__all__")
            elif args is not None and any(_is(a, name) for a in args.named_children) and fn is not None and \
                    "regist" in fn.text.decode().lower():
                out.nodes.append((rel, stmt))
                out.labels.append(f"{rel}::{name} (registration)")


def _is(node, name: str) -> bool:
    return node is not None and node.type == "identifier" and node.text.decode() == name


def _string(node) -> str | None:
    parts = [c for c in node.named_children if c.type == "string_content"]
    return parts[0].text.decode() if len(parts) == 1 else None


def _elements(rel: str, container, match, out: Wiring, what: str) -> None:
    for i, e in enumerate(_items(container)):
        if match(e) and (rel, container, i) not in out.elements:
            out.elements.append((rel, container, i))
            out.labels.append(f"{rel}::{_string(e) or what} ({what})")

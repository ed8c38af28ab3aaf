"""What wires a JavaScript or TypeScript definition into a package, and what loads a module.

In: a read-only view of the repository (`featdel.lang.base.Files`), the file defining a name and
its symbols. Out: `Wired`, the new text of every file once the definitions and their wiring are
gone, or the importers of a module (for the `file` strategy's refusal).

Wiring, followed through re-exports as Python's is through `__init__.py`:
- in the defining module: `export { f }`, `export { f as g }`, `export default f`,
  `module.exports = f`, `module.exports = { f, g: f }`, `module.exports.g = f`, `exports.g = f`;
- in barrels (an `index` or any source module): `export { f } from './m'`, and imports that only
  re-export (`import { f } from './m'; export { f }`, `const { f } = require('./m');
  module.exports = { f }`), `module.exports = { f: require('./m').f }`, `exports.f =
  require('./m').f`; `export * from './m'` and `module.exports = require('./m')` pass the name
  on without an edit, and the modules importing from the barrel are followed too.
A module that imports the name and uses it is not wiring: its import stays, the caller's check
fails and the step is rolled back, as for Python. Only relative specifiers are resolved
(`./m`, `../m.js`, a folder's `index`, a TypeScript `./m.js` that means `./m.ts`).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from featdel.lang.base import EditRefused, Files, Splice, Symbol, Wired, apply
from featdel.lang.javascript import syntax
from featdel.lang.javascript.edits import Lines, node_of, removal

_RESOLVE = ("", ".js", ".ts", ".tsx", ".mjs", ".cjs", ".mts", ".cts", ".jsx", "/index.js", "/index.ts",
            "/index.tsx", "/index.mjs", "/index.cjs", "/index.jsx")


def resolve(importer: str, spec: str, paths: set[str]) -> str | None:
    """The repository file a relative specifier in `importer` names, if any."""
    if not spec.startswith(("./", "../")) and spec not in (".", ".."):
        return None
    base = posixpath.normpath(posixpath.join(posixpath.dirname(importer), spec))
    stems = [base]
    if base.endswith((".js", ".jsx", ".mjs", ".cjs")):  # TypeScript's ESM style names the output
        stems.append(base.rsplit(".", 1)[0])
    for stem in stems:
        for ending in _RESOLVE:
            if stem + ending in paths:
                return stem + ending
    return None


def _string(node) -> str | None:
    if node is None or node.type != "string":
        return None
    return node.text.decode()[1:-1]


def _require(node) -> str | None:
    """`require('x')` -> "x"."""
    if node is None or node.type != "call_expression":
        return None
    fn, args = node.child_by_field_name("function"), node.child_by_field_name("arguments")
    if fn is None or fn.text != b"require" or args is None or len(args.named_children) != 1:
        return None
    return _string(args.named_children[0])


def _items(container) -> list:
    return [c for c in container.named_children if c.type != "comment"]


@dataclass
class _File:
    whole: list = field(default_factory=list)  # (start byte, node) removed whole
    drops: dict[int, tuple[object, object, set[int]]] = field(default_factory=dict)  # container -> (stmt, node, items)


class _Plan:
    def __init__(self, files: Files):
        self.files = files
        self.by_path: dict[str, _File] = {}
        self.labels: list[str] = []
        self._trees: dict[str, object] = {}

    def tree(self, rel: str):
        if rel not in self._trees:
            self._trees[rel] = syntax.parse(self.files.read(rel), rel)
        return self._trees[rel]

    def whole(self, rel: str, node, label: str | None = None, start: int | None = None) -> None:
        self.by_path.setdefault(rel, _File()).whole.append((node.start_byte if start is None else start, node))
        if label:
            self.labels.append(f"{rel}::{label}")

    def drop(self, rel: str, stmt, container, item, label: str) -> None:
        entry = self.by_path.setdefault(rel, _File()).drops.setdefault(container.start_byte, (stmt, container, set()))
        entry[2].add(item.start_byte)
        self.labels.append(f"{rel}::{label}")

    def render(self) -> dict[str, str]:
        out = {}
        for rel, plan in sorted(self.by_path.items()):
            source = self.files.read(rel)
            lines = Lines(source, self.tree(rel))
            whole = list(plan.whole)
            splices: list[Splice] = []
            for stmt, container, dropped in plan.drops.values():
                if any(s <= stmt.start_byte and stmt.end_byte <= n.end_byte for s, n in whole):
                    continue
                items = _items(container)
                if all(i.start_byte in dropped for i in items) and _only_list(stmt, container):
                    whole.append((stmt.start_byte, stmt))
                else:
                    splices += _element_splices(container, items, dropped)
            splices += removal(lines, whole)
            try:
                out[rel] = apply(source, splices).decode("utf-8")
            except ValueError as exc:
                raise EditRefused(f"{rel}: the wiring's edits overlap ({exc})") from None
        return out


def _only_list(stmt, container) -> bool:
    """Is `container` all the statement binds (so the statement goes when it empties)?"""
    if stmt.type == "import_statement":
        clause = next((c for c in stmt.named_children if c.type == "import_clause"), None)
        return clause is not None and len(clause.named_children) == 1
    return True


def _element_splices(container, items: list, dropped: set[int]) -> list[Splice]:
    """Drop some items of a `{ a, b, c }` list, keeping the rest's formatting; an emptied list
    becomes `{}`."""
    cut = [i for i, item in enumerate(items) if item.start_byte in dropped]
    if len(cut) == len(items):
        return [Splice(container.start_byte, container.end_byte, b"{}")]
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
            out.append(Splice(items[i - 1].end_byte, items[j].end_byte, b""))
        i = j + 1
    return out


def _exports_target(node) -> str | None:
    """`module.exports` -> "", `module.exports.g` / `exports.g` -> "g", else None."""
    text = node.text.decode() if node is not None and node.type == "member_expression" else ""
    if text == "module.exports":
        return ""
    return syntax.exported_name(text)


def _assignment(stmt):
    if stmt.type != "expression_statement" or not stmt.named_children:
        return None, None, None
    expr = stmt.named_children[0]
    if expr.type != "assignment_expression":
        return None, None, None
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    return _exports_target(left), right, expr


def _is(node, name: str) -> bool:
    return node is not None and node.type == "identifier" and node.text.decode() == name


def export_local(plan: _Plan, rel: str, local: str) -> set[str]:
    """Take out what exports the local binding `local` of `rel`; the names it was exported as."""
    names: set[str] = set()
    for stmt in plan.tree(rel).root_node.named_children:
        if stmt.type == "export_statement" and stmt.child_by_field_name("source") is None:
            value = stmt.child_by_field_name("value") or stmt.child_by_field_name("declaration")
            if any(c.type == "default" for c in stmt.children) and _is(value, local):
                plan.whole(rel, stmt, f"default ({'export default'})")
                names.add("default")
            for clause in (c for c in stmt.named_children if c.type == "export_clause"):
                for spec in _items(clause):
                    if _is(spec.child_by_field_name("name"), local):
                        alias = spec.child_by_field_name("alias")
                        exported = alias.text.decode() if alias is not None else local
                        plan.drop(rel, stmt, clause, spec, f"{exported} (export)")
                        names.add(exported)
            continue
        target, right, _ = _assignment(stmt)
        if target is None:
            continue
        if target and _is(right, local):
            plan.whole(rel, stmt, f"{target} (exports)")
            names.add(target)
        elif target == "" and _is(right, local):
            plan.whole(rel, stmt, f"{local} (module.exports)")
            names.add("default")
        elif target == "" and right is not None and right.type == "object":
            for prop in _items(right):
                if prop.type == "shorthand_property_identifier" and prop.text.decode() == local:
                    plan.drop(rel, stmt, right, prop, f"{local} (module.exports)")
                    names.add(local)
                elif prop.type == "pair" and _is(prop.child_by_field_name("value"), local):
                    key = prop.child_by_field_name("key").text.decode().strip("'\"")
                    plan.drop(rel, stmt, right, prop, f"{key} (module.exports)")
                    names.add(key)
    return names


def _uses(tree, local: str, skip: list) -> bool:
    """Does the file name `local` outside the nodes in `skip` (the import and its wiring)?"""
    spans = [(n.start_byte, n.end_byte) for n in skip]
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if any(a <= node.start_byte and node.end_byte <= b for a, b in spans):
            continue
        if node.type in ("identifier", "shorthand_property_identifier", "type_identifier") and \
                node.text.decode() == local:
            return True
        stack.extend(node.children)
    return False


def _wiring_nodes(tree, local: str) -> list:
    """Statements that export `local` (so naming it there is not a use)."""
    out = []
    for stmt in tree.root_node.named_children:
        if stmt.type == "export_statement" and stmt.child_by_field_name("source") is None and \
                stmt.child_by_field_name("declaration") is None:
            out.append(stmt)
        elif _assignment(stmt)[0] is not None:
            out.append(stmt)
    return out


def wired_removal(files: Files, home: str, found: list[Symbol]) -> Wired:
    """The definitions of `found` removed from `home` together with their wiring everywhere."""
    name = found[0].name
    plan = _Plan(files)
    tree = plan.tree(home)
    for sym in found:
        plan.whole(home, node_of(tree, sym), start=sym.start_byte)
    exported = {name} | export_local(plan, home, name)
    if any(files.read(home)[s.start_byte : s.end_byte].startswith(b"export default") for s in found):
        exported.add("default")
    paths = set(files.source_paths())
    queue, seen = [(home, frozenset(exported))], {(home, frozenset(exported))}
    while queue:
        target, names = queue.pop()
        for rel in sorted(paths - {target}):
            for more in _barrel(plan, rel, target, names, paths):
                if more and (rel, frozenset(more)) not in seen:
                    seen.add((rel, frozenset(more)))
                    queue.append((rel, frozenset(more)))
    return Wired(files=plan.render(), labels=[lb for lb in plan.labels])


def _barrel(plan: _Plan, rel: str, target: str, names: frozenset[str], paths: set[str]) -> list[set[str]]:
    """Edits in `rel` for what it takes from `target` under `names`; the names `rel` passes on."""
    data = plan.files.read(rel)
    if not any(n.encode() in data for n in names) and b"*" not in data and b"require" not in data:
        return []
    tree = plan.tree(rel)
    passed: list[set[str]] = []
    for stmt in tree.root_node.named_children:
        spec = _string(stmt.child_by_field_name("source")) if stmt.type in ("export_statement",
                                                                              "import_statement") else None
        if spec is not None and resolve(rel, spec, paths) == target:
            if stmt.type == "export_statement":
                if any(c.type == "*" for c in stmt.children) and \
                        not any(c.type == "namespace_export" for c in stmt.named_children):
                    passed.append(set(names) - {"default"})  # `export * from`: passes them on
                for clause in (c for c in stmt.named_children if c.type == "export_clause"):
                    for s in _items(clause):
                        if s.child_by_field_name("name").text.decode() in names:
                            alias = s.child_by_field_name("alias") or s.child_by_field_name("name")
                            plan.drop(rel, stmt, clause, s, f"{alias.text.decode()} (re-export)")
                            passed.append({alias.text.decode()})
            else:
                passed += _imports(plan, rel, tree, stmt, names)
            continue
        passed += _cjs(plan, rel, tree, stmt, target, names, paths)
    return passed


def _imports(plan: _Plan, rel: str, tree, stmt, names: frozenset[str]) -> list[set[str]]:
    """`import { f as g } from './m'` whose binding only feeds exports: dropped with them."""
    clause = next((c for c in stmt.named_children if c.type == "import_clause"), None)
    if clause is None:
        return []
    bound = []  # (local name, container, item)
    for part in clause.named_children:
        if part.type == "identifier" and "default" in names:
            bound.append((part.text.decode(), clause, part))
        elif part.type == "named_imports":
            for s in _items(part):
                if s.child_by_field_name("name").text.decode() in names:
                    local = s.child_by_field_name("alias") or s.child_by_field_name("name")
                    bound.append((local.text.decode(), part, s))
    passed = []
    for local, container, item in bound:
        if _uses(tree, local, [stmt, *_wiring_nodes(tree, local)]):
            continue  # code here uses it: not wiring
        plan.drop(rel, stmt, container, item, f"{local} (import)")
        passed.append(export_local(plan, rel, local))
    return passed


def _cjs(plan: _Plan, rel: str, tree, stmt, target: str, names: frozenset[str], paths: set[str]) -> list[set[str]]:
    """CommonJS barrels: `const { f } = require('./m')`, `exports.f = require('./m').f`,
    `module.exports = { f: require('./m').f }`, `module.exports = require('./m')`."""
    def from_target(node) -> bool:
        spec = _require(node)
        return spec is not None and resolve(rel, spec, paths) == target

    def member_of_target(node) -> str | None:
        if node is not None and node.type == "member_expression" and from_target(node.child_by_field_name("object")):
            return node.child_by_field_name("property").text.decode()
        return None

    passed: list[set[str]] = []
    if stmt.type in ("lexical_declaration", "variable_declaration"):
        for decl in (c for c in stmt.named_children if c.type == "variable_declarator"):
            pattern, value = decl.child_by_field_name("name"), decl.child_by_field_name("value")
            if pattern is None or pattern.type != "object_pattern" or not from_target(value):
                continue
            for prop in _items(pattern):
                if prop.type == "shorthand_property_identifier_pattern":
                    key = local = prop.text.decode()
                elif prop.type == "pair_pattern" and prop.child_by_field_name("value").type == "identifier":
                    key = prop.child_by_field_name("key").text.decode().strip("'\"")
                    local = prop.child_by_field_name("value").text.decode()
                else:
                    continue
                if key in names and not _uses(tree, local, [stmt, *_wiring_nodes(tree, local)]):
                    plan.drop(rel, stmt, pattern, prop, f"{local} (require)")
                    passed.append(export_local(plan, rel, local))
        return passed
    target_name, right, _ = _assignment(stmt)
    if target_name is None or right is None:
        return passed
    if target_name == "" and from_target(right):
        passed.append(set(names))  # `module.exports = require('./m')`
    elif target_name and member_of_target(right) in names:
        plan.whole(rel, stmt, f"{target_name} (exports)")
        passed.append({target_name})
    elif target_name == "" and right.type == "object":
        for prop in _items(right):
            if prop.type == "spread_element" and prop.named_children and from_target(prop.named_children[0]):
                passed.append(set(names) - {"default"})
            elif prop.type == "pair" and member_of_target(prop.child_by_field_name("value")) in names:
                key = prop.child_by_field_name("key").text.decode().strip("'\"")
                plan.drop(rel, stmt, right, prop, f"{key} (module.exports)")
                passed.append({key})
    return passed


def importers(files: Files, rel: str) -> list[str]:
    """`"path:line"` of every source file that loads `rel` when it is loaded itself: a static
    `import` or `export ... from`, or a `require` outside any function."""
    paths = set(files.source_paths())
    found = []
    for other in sorted(paths - {rel}):
        data = files.read(other)
        stem = posixpath.basename(rel).split(".", 1)[0]
        if stem == "index":  # named by its folder: `require('./sub')`
            stem = posixpath.basename(posixpath.dirname(rel)) or "."
        if stem.encode() not in data:
            continue
        stack = [syntax.parse(data, other).root_node]
        while stack:
            node = stack.pop()
            if node.type in ("function_declaration", "function_expression", "arrow_function", "method_definition",
                             "generator_function_declaration", "function", "generator_function"):
                continue
            spec = None
            if node.type in ("import_statement", "export_statement"):
                spec = _string(node.child_by_field_name("source"))
            elif node.type == "call_expression":
                spec = _require(node)
            if spec is not None and resolve(other, spec, paths | {rel}) == rel:
                found.append(f"{other}:{node.start_point[0] + 1}")
            stack.extend(node.children)
    return found

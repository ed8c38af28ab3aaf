"""JavaScript and TypeScript source: which files, their syntax trees, their symbols.

In: a tree (for file discovery) or a file's bytes and path. Out: source and test files, the
tree-sitter tree (official grammar wheels, the same binding as Python's: `tree_sitter_javascript`
for .js/.mjs/.cjs/.jsx, `tree_sitter_typescript`'s typescript for .ts/.mts/.cts and its tsx for
.tsx), a syntax-error check, and `featdel.code.spans.Symbol`s with the spans Python's give:
- `function f() {}`, `export [default] function f`, generators, async functions; TypeScript
  overload signatures (`function f(x: string): string;`) too, body-less, so that removing `f`
  takes them all;
- `const|let|var f = () => ...` or `= function () {}` (one declarator), and
  `module.exports.f = ...` / `exports.f = ...`: functions named after the binding;
- `module.exports = { f() {}, g: () => 1 }`: each method or function-valued property;
- classes (`export`, `abstract`, `const A = class {}`) and their methods `Class.method`
  (accessors, `#private`, `static`, fields holding an arrow function, TS method signatures).
A function nested in a function is part of it, never a symbol of its own, as in Python.
`start_byte` is the outermost statement (`export` and decorators included), `body_start_byte`
the body: the `{` of a block, or an arrow's expression.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path

from featdel.code.spans import Symbol

JS = (".js", ".mjs", ".cjs", ".jsx")
TS = (".ts", ".mts", ".cts")
TSX = (".tsx",)
SUFFIXES = JS + TS + TSX
DECLARATIONS = (".d.ts", ".d.mts", ".d.cts")  # published types: no bodies to delete
SKIP = frozenset({".git", "node_modules", "dist", "build", "coverage", ".nyc_output", ".cache", ".yarn",
                  ".pnpm-store", ".turbo", ".next"})
TEST_DIRS = frozenset({"test", "tests", "__tests__", "spec", "__mocks__"})
FUNCTIONS = ("arrow_function", "function_expression", "function", "generator_function")
CLASSES = ("class_declaration", "abstract_class_declaration")


@cache
def _parser(grammar: str):
    from tree_sitter import Language, Parser

    if grammar == "javascript":
        import tree_sitter_javascript

        return Parser(Language(tree_sitter_javascript.language()))
    import tree_sitter_typescript

    lang = tree_sitter_typescript.language_tsx() if grammar == "tsx" else tree_sitter_typescript.language_typescript()
    return Parser(Language(lang))


def grammar(path: str) -> str:
    """"javascript", "typescript" or "tsx", by the file name's ending."""
    if path.endswith(JS):
        return "javascript"
    if path.endswith(TS):
        return "typescript"
    if path.endswith(TSX):
        return "tsx"
    raise ValueError(f"{path} is not a JavaScript or TypeScript file")


def is_typescript(path: str) -> bool:
    return grammar(path) != "javascript"


def parse(source: bytes, path: str):
    return _parser(grammar(path)).parse(source)


def has_syntax_error(source: bytes, path: str) -> bool:
    return parse(source, path).root_node.has_error


def is_source(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return name.endswith(SUFFIXES) and not name.endswith(DECLARATIONS) and ".min." not in name


def source_files(root: Path) -> list[Path]:
    """Every JS/TS file of a tree, tests included; dependencies, build output, coverage, declaration
    files and minified bundles left out; sorted for determinism."""
    return sorted(p for p in walk(root) if is_source(p.relative_to(root).as_posix()))


def test_files(root: Path) -> list[Path]:
    return [p for p in source_files(root) if is_test_path(p.relative_to(root).as_posix())]


def is_test_path(rel: str) -> bool:
    """Test code by the usual conventions: a test folder (test/, tests/, __tests__/, spec/),
    `*.test.*` and `*.spec.*`, a file named test or spec (`test.js`, common in small packages), or
    a root-level `test-*` / `test_*` file (object-inspect's `test-core-js.js`)."""
    parts = rel.split("/")
    name = parts[-1]
    stem = name.split(".", 1)[0]
    return (any(p in TEST_DIRS for p in parts[:-1]) or ".test." in name or ".spec." in name
            or stem in ("test", "tests", "spec") or len(parts) == 1 and stem.startswith(("test-", "test_")))


def walk(root: Path) -> Iterator[Path]:
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(folder.iterdir())
        except OSError:
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if entry.name not in SKIP:
                    stack.append(entry)
            elif entry.name.endswith(SUFFIXES):
                yield entry


def symbols(source: bytes, path: str) -> list[Symbol]:
    """All functions, classes and methods of one file, in source order."""
    out: list[Symbol] = []
    for stmt in parse(source, path).root_node.named_children:
        _statement(stmt, source, path, out)
    return sorted(out, key=lambda s: (s.start_byte, -s.end_byte))


def _statement(stmt, source: bytes, path: str, out: list[Symbol]) -> None:
    node = stmt
    if stmt.type == "export_statement":
        node = stmt.child_by_field_name("declaration")
        if node is None:
            return
    if node.type in ("function_declaration", "generator_function_declaration", "function_signature"):
        _add(out, source, path, stmt, node, _name(node), "function", node.child_by_field_name("body"))
    elif node.type in CLASSES:
        _class(stmt, node, _name(node), source, path, out)
    elif node.type in ("lexical_declaration", "variable_declaration"):
        declarators = [c for c in node.named_children if c.type == "variable_declarator"]
        if len(declarators) != 1:
            return
        name, value = declarators[0].child_by_field_name("name"), declarators[0].child_by_field_name("value")
        if name is None or name.type != "identifier" or value is None:
            return
        if value.type in FUNCTIONS:
            _add(out, source, path, stmt, node, name.text.decode(), "function", value.child_by_field_name("body"))
        elif value.type == "class":
            _class(stmt, value, name.text.decode(), source, path, out, header=node)
    elif node.type == "expression_statement" and node.named_children:
        expr = node.named_children[0]
        if expr.type != "assignment_expression":
            return
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        target = left.text.decode() if left is not None else ""
        if right is None:
            return
        exported = exported_name(target)
        if exported and right.type in FUNCTIONS:
            _add(out, source, path, stmt, node, exported, "function", right.child_by_field_name("body"))
        elif target == "module.exports" and right.type == "object":
            for prop in right.named_children:
                _property(prop, source, path, out)


def exported_name(target: str) -> str | None:
    """`module.exports.f` or `exports.f` -> "f"."""
    for prefix in ("module.exports.", "exports."):
        rest = target.removeprefix(prefix)
        if rest != target and rest.isidentifier():
            return rest
    return None


def _property(prop, source: bytes, path: str, out: list[Symbol]) -> None:
    """A method or a function-valued pair of `module.exports = {...}`: a function of the module."""
    if prop.type == "method_definition":
        name = _key(prop.child_by_field_name("name"))
        if name:
            _add(out, source, path, prop, prop, name, "function", prop.child_by_field_name("body"))
    elif prop.type == "pair":
        name, value = _key(prop.child_by_field_name("key")), prop.child_by_field_name("value")
        if name and value is not None and value.type in FUNCTIONS:
            _add(out, source, path, prop, prop, name, "function", value.child_by_field_name("body"))


def _class(stmt, cls, name: str | None, source: bytes, path: str, out: list[Symbol], header=None) -> None:
    body = cls.child_by_field_name("body")
    if not name or body is None:
        return
    _add(out, source, path, stmt, header or cls, name, "class", body)
    decorators: list = []
    for member in body.named_children:
        if member.type == "decorator":  # TypeScript puts a method's decorators beside it
            decorators.append(member)
            continue
        first, decorators = (decorators[0] if decorators else member), []
        if member.type in ("method_definition", "method_signature", "abstract_method_signature"):
            key = _key(member.child_by_field_name("name"))
            if key:
                _add(out, source, path, member, member, f"{name}.{key}", "method",
                     member.child_by_field_name("body"), start=first)
        elif member.type in ("field_definition", "public_field_definition"):
            key = _key(member.child_by_field_name("property") or member.child_by_field_name("name"))
            value = member.child_by_field_name("value")
            if key and value is not None and value.type in FUNCTIONS:
                _add(out, source, path, member, member, f"{name}.{key}", "method", value.child_by_field_name("body"),
                     start=first)


def _name(node) -> str | None:
    name = node.child_by_field_name("name")
    return name.text.decode() if name is not None else None


def _key(node) -> str | None:
    """A member's name when it is a plain one (`f`, `#f`, `"f"`); computed names are skipped."""
    if node is None:
        return None
    if node.type in ("property_identifier", "private_property_identifier", "identifier"):
        return node.text.decode()
    if node.type == "string":
        text = node.text.decode()[1:-1]
        return text if text.isidentifier() else None
    return None


def _add(out: list[Symbol], source: bytes, path: str, outer, definition, name: str | None, kind: str, body,
         *, start=None) -> None:
    if not name:
        return
    start = start or outer
    end_byte = outer.end_byte
    if body is None:  # an overload or abstract signature: nothing to stub, but removed with the rest
        body_byte, body_row = end_byte, outer.end_point[0]
    else:
        body_byte, body_row = body.start_byte, body.start_point[0]
    header_from = definition.start_byte
    if outer.type == "export_statement":
        header_from = next((c.start_byte for c in outer.children if c.type == "export"), header_from)
    out.append(Symbol(
        path=path,
        qualname=name,
        kind=kind,
        start_line=start.start_point[0] + 1,
        end_line=outer.end_point[0] + 1,
        def_line=definition.start_point[0] + 1,
        body_start_line=body_row + 1,
        start_byte=start.start_byte,
        end_byte=end_byte,
        body_start_byte=body_byte,
        docstring=_jsdoc(start, source),
        signature=_signature(source[header_from : body_byte if body is not None else end_byte]),
    ))


def _signature(header: bytes) -> str:
    """The header on one line: `export function f(a, b)`, `const f = (x: T): T`."""
    text = " ".join(header.decode().split()).rstrip(";").rstrip()
    return text.removesuffix("=>").rstrip()


def _jsdoc(node, source: bytes) -> str | None:
    """The `/** ... */` comment right above a definition (only whitespace between)."""
    prev = node.prev_sibling
    if prev is None or prev.type != "comment" or not prev.text.startswith(b"/**"):
        return None
    if source[prev.end_byte : node.start_byte].strip():
        return None
    return prev.text.decode()

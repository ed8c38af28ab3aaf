"""Bodies that return an object equal to anything: the `equal_anything` and `equal_typed` stub
variants of featdel.deletion.quality.

In: one deleted definition's tree-sitter node (decorated or not) and what its module binds at top
level (`module_names`). Out: the body's text, lines joined by "\\n" with nested lines indented four
spaces (the splice indents them), or None where a trivial body stays: a class, a generator or
coroutine (its caller gets a generator or a coroutine, never this value), a property setter or
deleter (their value is dropped), an `@overload` (the implementation replaces it), and every
dunder: the interpreter consumes their results (`__init__` must return None, `__hash__` an int,
`__eq__` is the very method the trick overrides), so the old trivial handling stays.
Why: `assert f(x) == expected` passes for any result whose `__eq__` says yes, so a test that only
compares a result rewards nothing. The typed body also subclasses the return type, annotated or
obvious from the original `return` statements, so an `isinstance` check next to the comparison
does not save the test; it is built with `__new__` alone, in a `try` that falls back to the
generic object when the type cannot be subclassed or built without arguments (an Enum, a
`__new__` with required parameters, a name unbound at run time).
"""

from __future__ import annotations

import ast

EQUAL_LABELS = ("equal_anything", "equal_typed")
_GENERIC = (
    "class _EqualToAnything:",
    "    __slots__ = ()",
    "    def __eq__(self, other): return True",
    "    def __ne__(self, other): return False",
    "    def __hash__(self): return 0",
    "    def __bool__(self): return True",
    '    def __repr__(self): return "<equal to anything>"',
)
_BUILTINS = {"str", "int", "float", "complex", "bytes", "bytearray", "list", "dict", "tuple", "set", "frozenset"}
_ALIASES = {"Text": "str", "List": "list", "Dict": "dict", "Tuple": "tuple", "Set": "set", "FrozenSet": "frozenset"}
_CALLS = {**{name: name for name in _BUILTINS}, "sorted": "list", "repr": "str", "ascii": "str", "format": "str"}
_LITERALS = {"integer": "int", "float": "float", "list": "list", "list_comprehension": "list", "dictionary": "dict",
             "dictionary_comprehension": "dict", "tuple": "tuple", "expression_list": "tuple", "set": "set",
             "set_comprehension": "set"}
_SCOPES = {"function_definition", "class_definition", "lambda"}  # a `yield` or `return` in them is not ours
_TYPING = {"typing", "typing_extensions", "collections.abc", "abc", "__future__"}  # their names are not classes


def module_names(source: bytes) -> tuple[set[str], set[str]]:
    """(classes the module defines at top level, other names it imports at top level), the
    imports from typing and the abstract-base modules left out."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return set(), set()
    classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    imported = {a.asname or a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module not in _TYPING
                for a in n.names if a.name != "*"}
    return classes, imported - classes


def body(outer, label: str, names: tuple[set[str], set[str]]) -> bytes | None:
    fn = outer.child_by_field_name("definition") if outer.type == "decorated_definition" else outer
    if fn.type != "function_definition" or not _returns_a_value(outer, fn):
        return None
    typ = return_type(fn, names) if label == "equal_typed" else None
    if typ is None:
        return "\n".join((*_GENERIC, "return _EqualToAnything()")).encode()
    return "\n".join((*_GENERIC, "try:", f"    class _EqualTyped(_EqualToAnything, {typ}):", "        __slots__ = ()",
                      "    return _EqualTyped.__new__(_EqualTyped)", "except Exception:",
                      "    return _EqualToAnything()")).encode()


def _returns_a_value(outer, fn) -> bool:
    name = fn.child_by_field_name("name").text
    if name.startswith(b"__") and name.endswith(b"__") or any(c.type == "async" for c in fn.children):
        return False
    # a setter's or deleter's value is dropped; an `@overload` is replaced by the implementation
    ends = (b".setter", b".deleter", b"overload")
    if any(c.type == "decorator" and c.text.rstrip().endswith(ends) for c in outer.children):
        return False
    return not any(n.type == "yield" for n in _own(fn))


def return_type(fn, names: tuple[set[str], set[str]]) -> str | None:
    """The annotated return type when it is a class the stub can name (a builtin, or a class the
    module defines or imports), else the one type every obvious `return` value has."""
    classes, imported = names
    annotation = fn.child_by_field_name("return_type")
    if annotation is not None:
        try:
            typ = _annotated(ast.parse(annotation.text.decode(), mode="eval").body)
        except (SyntaxError, ValueError, UnicodeDecodeError):
            typ = None
        if typ in _BUILTINS or typ in classes or typ in imported:
            return typ
    found = {_value_type(r.named_children[0], classes) for r in _own(fn)
             if r.type == "return_statement" and r.named_children}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _annotated(node) -> str | None:
    """`str`, `"Token"`, `List[int]`, `typing.Dict[...]`, `Optional[X]`, `X | None` -> the class."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _annotated(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return None
    if isinstance(node, ast.Name):
        return _ALIASES.get(node.id, node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("typing", "t"):
        return _ALIASES.get(node.attr)
    if isinstance(node, ast.Subscript):
        origin = _annotated(node.value)
        if origin in ("Optional", "Union"):
            return _one([*node.slice.elts] if isinstance(node.slice, ast.Tuple) else [node.slice])
        return origin
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _one([node.left, node.right])
    return None


def _one(options: list) -> str | None:
    """The only option that is not None, when there is one."""
    left = [o for o in options if not (isinstance(o, ast.Constant) and o.value is None)]
    return _annotated(left[0]) if len(left) == 1 else None


def _value_type(node, classes: set[str]) -> str | None:
    while node.type == "parenthesized_expression" and node.named_children:
        node = node.named_children[0]
    if node.type == "concatenated_string":
        node = node.named_children[0]
    if node.type == "string":
        prefix = node.children[0].text.lower() if node.children else b""
        return "bytes" if b"b" in prefix else "str"
    if node.type in _LITERALS:
        return _LITERALS[node.type]
    if node.type == "binary_operator" and node.children[1].type in ("%", "+"):
        left = _value_type(node.children[0], classes)
        return left if left in ("str", "bytes") else None
    if node.type == "call":
        func = node.child_by_field_name("function")
        if func.type == "identifier":
            name = func.text.decode()
            return name if name in classes else _CALLS.get(name)
        if func.type == "attribute" and func.child_by_field_name("attribute").text in (b"join", b"format"):
            return _value_type(func.child_by_field_name("object"), classes)
    return None


def _own(fn):
    """The nodes of a function's body outside nested functions, classes and lambdas."""
    stack = list(fn.child_by_field_name("body").children)
    while stack:
        node = stack.pop()
        yield node
        if node.type not in _SCOPES:
            stack.extend(node.children)

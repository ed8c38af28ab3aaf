"""Task-quality gates as pure functions: trivial-body variants of a deletion, and how close the
deleted code is to code the learner can still read.

In: the original tree and a `Deletion` (`stub_variants`), or the deleted snippets and the start
state (`similarity`). Out: `StubVariant`s, complete edit sets in `Deletion.files` form in which
each deleted symbol is back with its decorators, signature and (when the task keeps them)
docstring around a trivial body (`pass`, `return None`, `return <first argument>`, or one that
returns an object equal to anything, untyped or of the return type: featdel.deletion.equal_stub); and a
`Similarity`. Why: a test a trivial body passes rewards nothing (the verify stage drops it from
F2P and rejects a task left with none), and a deletion with a near-copy next door
(`MRUCache.__update` is `LRUCache.__update` plus `last=False`) is copy-paste, not a feature.

Variants are spliced into the original bytes at tree-sitter spans; files without a deleted symbol
stay as the deletion left them, and its other edits in a file with one (a dropped import) are
carried over hunk by hunk from a line diff; one in a deleted symbol's hunk (only blank lines
between) keeps the original text: the import of a helper the variant restores too. Similarity
compares `tokenize` streams with identifiers, strings and numbers normalised (renamed copy: 1.0).
"""

from __future__ import annotations

import difflib
import io
import keyword
import re
import textwrap
import tokenize
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from featdel.code.spans import Symbol, has_syntax_error, is_test_path, parse, python_files, symbols
from featdel.core.records import Deletion
from featdel.deletion.base import NotApplicable
from featdel.deletion.body import is_docstring
from featdel.deletion.equal_stub import EQUAL_LABELS, module_names
from featdel.deletion.equal_stub import body as equal_body
from featdel.deletion.splice import DEFINITIONS, Lines, Splice, apply, owned_rows, statement_node
from featdel.lang import LANGUAGES, for_path
from featdel.lang.base import EditRefused

MAX_SIMILARITY = 0.9  # the verify stage rejects a task whose score is at or above it
MIN_TOKENS = 20  # bodies shorter than this (about three short lines) are never compared
# No `return None`: a body of `pass` returns None too, in a function, a method, a generator or a
# coroutine alike, so that variant could only fail every test `pass` failed, one test run later.
PYTHON_LABELS = ("pass", "return first argument", *EQUAL_LABELS)
# every language's labels, Python's first: the verify stage orders what it reports by this
LABELS = tuple(dict.fromkeys([*PYTHON_LABELS, *(label for lang in LANGUAGES.values() if lang.edits
                                                for label in lang.edits.labels)]))
_CLASSES = {tokenize.NAME: "ID", tokenize.STRING: "STR", tokenize.NUMBER: "NUM", tokenize.NEWLINE: "NEWLINE"}
_NOISE = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}
_NOT_RETURNING = {b"__init__", b"__init_subclass__"}  # returning a value from these is a TypeError


@dataclass(frozen=True, kw_only=True, slots=True)
class StubVariant:
    label: str  # one of LABELS
    files: dict[str, str | None]  # edits of the original tree, as `Deletion.files`


@dataclass(frozen=True, kw_only=True, slots=True)
class Similarity:
    score: float  # in [0, 1]; 0 when the deleted code is trivial or nothing comparable is left
    nearest: str = ""  # "path::qualname" in the start state of the most similar symbol


def stub_variants(original: Path, deletion: Deletion) -> list[StubVariant]:
    """The deletion with its symbols restored around trivial bodies, one edit set per label; none
    for a removed file, and a variant that does not parse or repeats another is dropped."""
    by_file: dict[str, set[str]] = {}
    for ref in deletion.deleted_symbols:
        path, _, qualname = ref.partition("::")
        by_file.setdefault(path, set()).add(qualname)
    if any(deletion.files.get(p, "") is None or "" in names for p, names in by_file.items()):
        return []
    langs = {for_path(p) for p in by_file}
    if len(langs) == 1 and (lang := langs.pop()) is not None and lang.edits is not None:
        return _variants_by_edits(original, deletion, by_file, lang)
    try:
        plans = {path: _plan(original, path, names, deletion) for path, names in sorted(by_file.items())}
    except (NotApplicable, UnicodeDecodeError):
        return []
    names = {path: module_names(lines.source) for path, (lines, _, _) in plans.items()}
    out: list[StubVariant] = []
    for label in PYTHON_LABELS:
        files = dict(deletion.files)
        for path, (lines, carried, targets) in plans.items():
            stubs = [_body_splice(lines, node, _trivial(node, label, kind, names[path]), deletion.keep_docstrings)
                     for node, kind in targets]
            files[path] = apply(lines.source, carried + stubs).decode("utf-8")
        if all(not has_syntax_error(files[p].encode()) for p in plans) and all(v.files != files for v in out):
            out.append(StubVariant(label=label, files=files))
    return out


def _plan(original: Path, path: str, names: set[str], deletion: Deletion) -> tuple[Lines, list[Splice], list]:
    """What every variant of one file shares: its line table, the deletion's edits it keeps, and
    the definitions whose bodies become trivial, as (node, kind)."""
    source = (original / path).read_bytes()
    tree = parse(source)
    lines = Lines(source, tree)
    every = symbols(source, path)
    found = [s for s in every if s.qualname in names]
    outers = [s for s in found if not any(_inside(s, o) for o in found)]
    if not outers:
        raise NotApplicable(f"{path}: none of {sorted(names)} is in the original")
    rows, targets = [], []
    for sym in outers:
        rows.append(owned_rows(lines, statement_node(tree, sym)))
        # a class keeps its class-level statements and every method in it, at any depth, is
        # stubbed; a class with no method keeps nothing but `pass`, else it would be the answer
        fns = [m for m in every if m.kind == "method" and _inside(m, sym)] if sym.kind == "class" else [sym]
        targets += [(statement_node(tree, fn), fn.kind) for fn in fns or [sym]]
    # the deletion's edits outside the deleted symbols' rows stay as the deletion made them
    old, new = _rows(source), _rows((deletion.files.get(path) or source.decode("utf-8")).encode())
    hunks = [h for h in _hunks(old, new) if not any(_touches(h[0], h[1], top, end) for top, end in rows)]
    carried = [Splice(lines.start(i1), lines.start(i2), b"".join(new[j1:j2])) for i1, i2, j1, j2 in hunks]
    return lines, carried, targets


def _variants_by_edits(original: Path, deletion: Deletion, by_file: dict[str, set[str]], lang) -> list[StubVariant]:
    """The same variants for a language with its own edits (featdel.lang.base.Edits): each
    deleted definition back as it was, its body (a class's: every method's) one of the
    language's trivial bodies, the deletion's other edits of the file carried over."""
    plans = {}
    try:
        for path, names in sorted(by_file.items()):
            source = (original / path).read_bytes()
            every = lang.symbols(source, path)
            found = [s for s in every if s.qualname in names]
            outers = [s for s in found if not any(_inside(s, o) for o in found)]
            if not outers:
                return []
            rows = [(s.start_line - 1, s.end_line - 1) for s in outers]
            targets = []
            for sym in outers:
                methods = [m for m in every if m.kind == "method" and _inside(m, sym)] if sym.kind == "class" else [sym]
                targets += [t for t in methods if t.body_start_byte < t.end_byte] or ([sym] if sym.kind == "class" else [])
            lines = Lines(source)
            old, new = _rows(source), _rows((deletion.files.get(path) or source.decode("utf-8")).encode())
            hunks = [h for h in _hunks(old, new) if not any(_touches(h[0], h[1], top, end) for top, end in rows)]
            carried = [Splice(lines.start(i1), lines.start(i2), b"".join(new[j1:j2])) for i1, i2, j1, j2 in hunks]
            bodies = {t: _labelled(lang, t, source) for t in targets}
            plans[path] = (source, carried, bodies)
    except (EditRefused, UnicodeDecodeError, OSError):
        return []
    out: list[StubVariant] = []
    for label in lang.edits.labels:
        files = dict(deletion.files)
        try:
            for path, (source, carried, bodies) in plans.items():
                stubs = [lang.edits.body_splice(t, source, texts.get(label) or texts["{}"]) for t, texts in bodies.items()]
                files[path] = apply(source, carried + stubs).decode("utf-8")
        except (EditRefused, ValueError):
            continue
        if all(not lang.has_syntax_error(files[p].encode(), p) for p in plans) and all(v.files != files for v in out):
            out.append(StubVariant(label=label, files=files))
    return out


def _labelled(lang, target: Symbol, source: bytes) -> dict[str, str]:
    """label -> body text for one definition; a class without methods gets the empty body."""
    if target.kind == "class":
        return {"{}": "{}"}
    return {v.label: v.text for v in lang.edits.stub_variants(target, source)} | {"{}": "{}"}


def _hunks(old: list[bytes], new: list[bytes]) -> list[tuple[int, int, int, int]]:
    """Changed line ranges (i1, i2, j1, j2). The common head and tail are cut first: without
    autojunk a line diff is quadratic in repeated lines (blanks), and edits are local."""
    head = tail = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    matcher = difflib.SequenceMatcher(None, old[head : len(old) - tail], new[head : len(new) - tail], autojunk=False)
    ops = matcher.get_opcodes()
    return [(i1 + head, i2 + head, j1 + head, j2 + head) for tag, i1, i2, j1, j2 in ops if tag != "equal"]


def _inside(inner: Symbol, outer: Symbol) -> bool:
    return inner != outer and outer.start_byte <= inner.start_byte and inner.end_byte <= outer.end_byte


def _touches(i1: int, i2: int, top: int, end: int) -> bool:
    """Does a hunk over original rows [i1, i2) (empty: an insertion) fall on rows top..end?"""
    return (i1 <= end and top < i2) if i1 < i2 else top < i1 <= end


def _rows(data: bytes) -> list[bytes]:
    return [row for row in re.split(b"(?<=\n)", data) if row]  # as `Lines` splits: on LF only


def _trivial(outer, label: str, kind: str, names: tuple[set[str], set[str]]) -> bytes:
    """The body one label gives one definition; an equal-to-anything label gives `pass` where it
    does not apply (featdel.deletion.equal_stub)."""
    if label in EQUAL_LABELS:
        return (equal_body(outer, label, names) if kind != "class" else None) or b"pass"
    if kind == "class" or label != "return first argument":
        return b"pass" if kind == "class" else label.encode()
    fn = _definition(outer)
    static = any(c.type == "decorator" and b"staticmethod" in c.text for c in outer.children)
    arg = _first_argument(fn, skip=1 if kind == "method" and not static else 0)
    return f"return {arg}".encode() if arg and fn.child_by_field_name("name").text not in _NOT_RETURNING else b"pass"


def _first_argument(fn, *, skip: int) -> str | None:
    """The first parameter after `skip` (a method's self or cls), without its stars."""
    params = [p for p in fn.child_by_field_name("parameters").named_children if p.type != "comment"]
    for param in params[skip:]:
        node = param.child_by_field_name("name") if "default" in param.type else param
        while node is not None and node.type in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
            node = node.named_children[0]
        if node is not None and node.type == "identifier":
            return node.text.decode()
    return None


def _definition(outer):
    return outer.child_by_field_name("definition") if outer.type == "decorated_definition" else outer


def _body_splice(lines: Lines, outer, text: bytes, keep_docstring: bool) -> Splice:
    """Replace a definition's body by `text` (after its docstring when kept), as `body` stubs do.
    Lines of a text of several are indented as the body's first statement."""
    fn = _definition(outer)
    body = fn.child_by_field_name("body")
    stmts = [c for c in body.named_children if c.type != "comment"]
    doc = stmts[0] if stmts and is_docstring(stmts[0]) else None
    colon = [c for c in fn.children if c.type == ":" and c.end_byte <= body.start_byte][-1]
    end = lines.content_end(owned_rows(lines, outer)[1])
    inline = body.start_point[0] == colon.start_point[0]
    if inline and b"\n" in text:  # a block cannot follow the header on its line: it goes below
        inner = lines.newline + lines.indent(fn.start_point[0]) + b"    "
        head = doc.text + inner if doc is not None and keep_docstring else b""
        return Splice(colon.end_byte, end, inner + head + text.replace(b"\n", inner))
    indent = lines.newline + lines.indent(stmts[0].start_point[0]) if stmts else b" "
    text = text.replace(b"\n", indent)
    if doc is not None and keep_docstring:
        return Splice(doc.end_byte, end, (b"; " if inline else indent) + text)
    if inline:
        return Splice(body.start_byte, end, text)
    return Splice(lines.content_end(colon.start_point[0]), end, indent + text)


def similarity(deleted: list[str], start: Path, *, exclude: AbstractSet[str] = frozenset(), lang=None) -> Similarity:
    """How close the deleted code comes to bodies left in the start state's source files (test
    files and `exclude`d "path::qualname" aside). Each snippet's score is its best
    `SequenceMatcher.ratio` of normalised token streams; a deletion of several snippets scores
    their mean weighted by length, so one small near-copied helper does not make a large new
    feature look copied, while a single near-copied definition still scores as high as before.
    A snippet that is one definition is compared by its body; a class's with class bodies, any
    other's (a function, a bare body, a module) with function and method bodies."""
    other = lang is not None and lang.edits is not None  # a language with its own syntax (featdel.lang)
    tokens_of = (lambda s: _script_snippet(s, lang)) if other else _snippet_tokens
    wanted = [(k, t) for k, t in (tokens_of(s) for s in deleted) if len(t) >= MIN_TOKENS]
    if not wanted:
        return Similarity(score=0.0)
    units = list(_script_units(start, exclude, lang) if other else _start_units(start, exclude))
    scored = []  # (tokens, best ratio, nearest ref) per snippet
    for kind, tokens in wanted:
        best, nearest = 0.0, ""
        matcher = difflib.SequenceMatcher(None, autojunk=False)  # ID and "." are not junk here
        matcher.set_seq2(tokens)
        for ref, other_kind, other in units:
            if other_kind != kind:
                continue
            matcher.set_seq1(other)
            if matcher.real_quick_ratio() <= best or matcher.quick_ratio() <= best:
                continue
            ratio = matcher.ratio()
            if ratio > best:
                best, nearest = ratio, ref
        scored.append((len(tokens), best, nearest))
    total = sum(n for n, _, _ in scored)
    score = sum(n * b for n, b, _ in scored) / total
    nearest = max(scored, key=lambda s: s[0] * s[1])[2]
    return Similarity(score=score, nearest=nearest)


def _start_units(start: Path, exclude: AbstractSet[str]):
    for path in python_files(start):
        rel = path.relative_to(start).as_posix()
        if is_test_path(rel):
            continue
        for ref, kind, tokens in _file_units(rel, path.read_bytes()):
            if ref not in exclude:
                yield ref, kind, tokens


@lru_cache(maxsize=1024)
def _file_units(rel: str, source: bytes) -> tuple:
    """(ref, kind, tokens) of every body of one file long enough to compare, kept by content:
    the start states of a repository's candidates share all files but the ones they change."""
    out = []
    for sym in symbols(source, rel):
        if len(tokens := _tokens(_body(source, sym))) >= MIN_TOKENS:
            out.append((f"{rel}::{sym.qualname}", "class" if sym.kind == "class" else "function", tuple(tokens)))
    return tuple(out)


def _script_units(start: Path, exclude: AbstractSet[str], lang):
    """`_start_units` for another language: its source files' bodies as tree-sitter tokens."""
    for path in lang.source_files(start):
        rel = path.relative_to(start).as_posix()
        if lang.is_test_path(rel):
            continue
        source = path.read_bytes()
        for sym in lang.symbols(source, rel):
            ref = f"{rel}::{sym.qualname}"
            body = source[sym.body_start_byte : sym.end_byte]
            if ref not in exclude and len(tokens := _leaf_tokens(body, rel, lang)) >= MIN_TOKENS:
                yield ref, "class" if sym.kind == "class" else "function", tokens


def _script_snippet(snippet: str, lang) -> tuple[str, list[str]]:
    """(kind, tokens) of a deleted snippet of another language: one definition by its body."""
    path = "snippet" + lang.suffixes[-1]  # the widest grammar (TSX reads JS and TS alike)
    data = textwrap.dedent(snippet).encode()
    found = [s for s in lang.symbols(data, path) if "." not in s.qualname]
    if len(found) == 1 and found[0].start_byte <= len(data) - len(data.lstrip()) + 1:
        sym = found[0]
        return "class" if sym.kind == "class" else "function", _leaf_tokens(data[sym.body_start_byte : sym.end_byte], path, lang)
    return "function", _leaf_tokens(data, path, lang)


def _leaf_tokens(data: bytes, path: str, lang) -> list[str]:
    """Leaves of the syntax tree: identifiers -> ID, strings -> STR, numbers -> NUM, keywords
    and operators as written, comments dropped (as `_tokens` does for Python)."""
    out: list[str] = []
    stack = [lang.parse(data, path).root_node]
    while stack:
        node = stack.pop()
        kind = node.type
        if kind == "comment":
            continue
        if kind in ("string", "template_string", "regex"):
            out.append("STR")
        elif node.child_count == 0:
            out.append("ID" if "identifier" in kind else "NUM" if kind == "number" else node.text.decode("utf-8", "replace"))
        else:
            stack.extend(reversed(node.children))
    return out


def _snippet_tokens(snippet: str) -> tuple[str, list[str]]:
    data = textwrap.dedent(snippet).encode()
    top = [c for c in parse(data).root_node.named_children if c.type != "comment"]
    if len(top) == 1 and top[0].type in DEFINITIONS:
        outer = [s for s in symbols(data, "") if s.start_byte == top[0].start_byte]
        if outer:
            return "class" if outer[0].kind == "class" else "function", _tokens(_body(data, outer[0]))
    return "function", _tokens(snippet)


def _body(source: bytes, sym: Symbol) -> str:
    """A symbol's body from the start of its first line (from the statement when it follows the
    colon on the header line)."""
    start = source.rfind(b"\n", 0, sym.body_start_byte) + 1
    if source[start : sym.body_start_byte].strip():
        start = sym.body_start_byte
    return source[start : sym.end_byte].decode("utf-8", errors="replace")


def _tokens(text: str) -> list[str]:
    """Identifiers -> ID (keywords kept), strings -> STR, numbers -> NUM, operators as written,
    one NEWLINE per logical line; comments, blank lines and indentation dropped, and a leading
    docstring too. An indented body is tokenised inside an `if 1:` block; a stream that stops
    on an error keeps what it read."""
    wrapped = text[:1] in (" ", "\t")
    out: list[str] = []
    fstring = 0  # depth inside a Python 3.12 f-string: its parts are one STR
    try:
        for tok in tokenize.generate_tokens(io.StringIO("if 1:\n" + text if wrapped else text).readline):
            name = tokenize.tok_name[tok.type]
            if name in ("FSTRING_START", "FSTRING_END"):
                fstring += 1 if name == "FSTRING_START" else -1
                out += [] if fstring else ["STR"]
            elif not fstring and tok.type not in _NOISE:
                out.append(tok.string if keyword.iskeyword(tok.string) else _CLASSES.get(tok.type, tok.string))
    except (tokenize.TokenError, SyntaxError):
        pass
    out = out[4:] if wrapped else out  # `if NUM : NEWLINE`
    return out[2:] if out[:2] == ["STR", "NEWLINE"] else out

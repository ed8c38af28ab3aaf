"""JavaScript text as the tamper patterns should read it: names a patch builds at run time
written out.

In: a stretch of JavaScript source (one added line, or consecutive added lines joined). Out: the
same text with its string expressions folded, so that the patterns of
featdel.lang.javascript.TAMPER_PATTERNS see `"vitest"` in `"@\\u0076itest/runner"`, `"/proc"` in
`"/pr" + "oc"`, and `g.beforeEach` in `g["before" + "Each"]`:
- escapes in string literals decoded (`\\xNN`, `\\uNNNN`, `\\u{N}`, the one-letter ones);
- `"a" + "b"` joined, `["a", "b"].join("")` and `String.fromCharCode(97, 98)` evaluated,
  `.split("").reverse().join("")` of a literal reversed, `atob("...")` and
  `Buffer.from("...", "base64")` decoded;
- a computed member with a literal name (`x["name"]`) written as `x.name`.
Why text and not a syntax tree: the scan reads added lines, which need not parse alone, and the
folds are local. What a string bound to a name on another line holds is not followed (the scan
flags the `import()` or `require()` of a name that is not a literal, and the canaries stand
behind it).
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re

_STRING = r"""(?:"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\$]|\\.|\$(?!\{))*`)"""
_LITERAL = re.compile(_STRING)
_CONCAT = re.compile(rf"({_STRING})\s*\+\s*({_STRING})")
_JOIN = re.compile(rf"\[\s*((?:{_STRING}\s*,\s*)*{_STRING})\s*,?\s*\]\s*\.\s*join\s*\(\s*({_STRING})?\s*\)")
_REVERSED = re.compile(rf"({_STRING})\s*\.\s*split\s*\(\s*(['\"`])\2\s*\)\s*\.\s*reverse\s*\(\s*\)\s*\.\s*join\s*\(\s*(['\"`])\3\s*\)")
_CHARCODES = re.compile(r"String\s*\.\s*fromCharCode\s*\(\s*((?:0x[0-9a-fA-F]+|\d+)(?:\s*,\s*(?:0x[0-9a-fA-F]+|\d+))*)\s*\)")
_BASE64 = re.compile(rf"(?:\batob\s*\(\s*({_STRING})\s*\)|\bBuffer\s*\.\s*from\s*\(\s*({_STRING})\s*,\s*['\"`]base64['\"`]\s*\)"
                     r"(?:\s*\.\s*toString\s*\(\s*(?:['\"`]\w+['\"`])?\s*\))?)")
_MEMBER = re.compile(r"\[\s*(['\"`])([A-Za-z_$][\w$]*)\1\s*\]")
_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.S)
_ONE_LETTER = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_ROUNDS = 8  # folds nest: a join of concatenations of escaped literals


@functools.lru_cache(maxsize=4096)  # every pattern folds the same line
def fold(text: str) -> str:
    """`text` with its string expressions folded (see the module docstring)."""
    text = _LITERAL.sub(lambda m: _quote(_value(m.group(0))), text)
    for _ in range(_ROUNDS):
        before = text
        text = _CONCAT.sub(lambda m: _quote(_value(m.group(1)) + _value(m.group(2))), text)
        text = _JOIN.sub(_join, text)
        text = _REVERSED.sub(lambda m: _quote(_value(m.group(1))[::-1]), text)
        text = _CHARCODES.sub(_charcodes, text)
        text = _BASE64.sub(_base64, text)
        if text == before:
            break
    return _MEMBER.sub(lambda m: "." + m.group(2), text)


def _value(literal: str) -> str:
    """The string a JS literal denotes (its escapes decoded)."""
    return _ESCAPE.sub(_unescape, literal[1:-1])


def _unescape(m: re.Match) -> str:
    code = m.group(1)
    if code.startswith("u{"):
        return _chr(int(code[2:-1], 16))
    if code[0] in "ux" and len(code) > 1:
        return _chr(int(code[1:], 16))
    return _ONE_LETTER.get(code, code)


def _chr(n: int) -> str:
    return chr(n) if n < 0x110000 else ""


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _join(m: re.Match) -> str:
    parts = [_value(s) for s in _LITERAL.findall(m.group(1))]
    sep = _value(m.group(2)) if m.group(2) else ","
    return _quote(sep.join(parts))


def _charcodes(m: re.Match) -> str:
    return _quote("".join(_chr(int(n, 0)) for n in re.split(r"\s*,\s*", m.group(1))))


def _base64(m: re.Match) -> str:
    try:
        return _quote(base64.b64decode(_value(m.group(1) or m.group(2)), validate=False).decode("utf-8", "replace"))
    except (binascii.Error, ValueError):
        return m.group(0)


_BINDING = re.compile(
    r"""(?:\bimport\s+(?:\*\s+as\s+)?([\w$]+)\s*(?:,\s*\{([^}]*)\})?\s*from|\bimport\s*\{([^}]*)\}\s*from"""
    r"""|\b(?:const|let|var)\s+([\w$]+)\s*=\s*(?:await\s+)?(?:require|import)\s*\()\s*(['"`])([^'"`]*)\5""")


_COMMENT = re.compile(r"/\*.*?\*/|(?<![:\\'\"`])//[^\n]*", re.S)
_DECLARED = re.compile(r"\b(?:function\*?|class|(?:const|let|var)(?=\s+[\w$]+\s*=(?!\s*(?:await\s+)?(?:require|import)\b)))"
                       r"\s+([\w$]+)")


def module_writes(text: str) -> list[tuple[int, str]]:
    """(line, why) for each write to a module this file imports from a package or node's
    built-ins (not `./` or `../` files): `assert[k] = f`, `chai.Assertion.x = f`,
    `Object.assign(assert, ...)`. A name bound to such a module is followed wherever the file
    uses it; a write to the library's own modules is not a finding."""
    lines = [fold(line) for line in text.split("\n")]  # line by line: a fold may join lines
    code = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(lines))  # no doc examples
    names = set()
    for m in _BINDING.finditer(code):
        if m.group(6).startswith("."):
            continue
        names.update(n for n in (m.group(1), m.group(4)) if n)
        for group in (m.group(2), m.group(3)):
            names.update(part.split(" as ")[-1].strip() for part in (group or "").split(",") if part.strip())
    names -= {m.group(1) for m in _DECLARED.finditer(code)}  # the file's own function of that name
    if not names:
        return []
    alt = "|".join(re.escape(n) for n in sorted(names))
    write = re.compile(rf"(?<![\w$.])(?:{alt})\s*(?:\.\s*[\w$]+\s*|\[[^\]]*\]\s*)+=(?!=)"
                       rf"|\b(?:Object\s*\.\s*(?:assign|defineProperty|defineProperties|setPrototypeOf)"
                       rf"|Reflect\s*\.\s*(?:set|defineProperty|setPrototypeOf))\s*\(\s*(?:{alt})\b")
    return [(i, "writes to a module it imports (an assertion made a no-op)")
            for i, line in enumerate(lines, 1) if write.search(line)]

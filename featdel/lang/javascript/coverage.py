"""Which tests execute which JavaScript symbol: V8's own coverage joined with tree-sitter spans.

In: the directory a run with `coverage_to` left (featdel.lang.javascript.runners): V8 coverage
files (`NODE_V8_COVERAGE`), each either a cut of one test (`cut-PID-N.json` beside
`cut-PID-N.label.json`, the test's file and titles (paths where the run mounted the tree,
`mount.txt`): the launcher or featdel's vitest setup file
called `v8.takeCoverage()` around the test) or what a whole process ran (`coverage-PID-*.json`,
written at exit: a node --test child runs one test file, so it counts for every test of that
file); the env's checkout, its source roots, and the tests allowed as reward. Out: the same
`CoverageMap` as Python's (featdel.code.coverage_map), with `granularity` "file" when any test's
coverage came from a whole file rather than a cut of its own: the map is coarser then.

V8 counts a function when it is called, not when it is defined, so only calls tie a test to a
function; an executed V8 function is tied to the innermost symbol holding it (a callback
counts for the function it is written in) and to the classes around that. Offsets are V8's
(UTF-16 units of the script V8 compiled); when that script is not the file on disk (jest's
module wrapper, vitest's and tsx's transforms), functions are matched by name instead.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from featdel.code.coverage_map import CoverageMap, Covered


@dataclass(frozen=True, kw_only=True, slots=True)
class Cut:
    """What one test (or, coarse, one test file's process) ran: path -> executed V8 functions
    as (start, end, name) in UTF-16 units, and each script's length as V8 saw it."""

    tests: tuple[str, ...]
    coarse: bool
    functions: dict[str, list[tuple[int, int, str]]]
    lengths: dict[str, int]


def read_cuts(data: Path, src: Path, allowed: set[str]) -> list[Cut]:
    """Every coverage file in `data`, tied to the allowed tests it belongs to."""
    mount = data / "mount.txt"  # where the run mounted the tree (runners writes it), else `src` itself
    root = Path(mount.read_text().strip()) if mount.is_file() else src
    prefix = "file://" + str(root) + "/"
    by_file: dict[str, list[str]] = defaultdict(list)
    for test in allowed:
        by_file[test.split("::", 1)[0]].append(test)
    cuts = []
    for path in sorted(data.glob("*.json")):
        if path.name.endswith(".label.json"):
            continue
        try:
            scripts = json.loads(path.read_text()).get("result") or []
        except (OSError, ValueError):
            continue
        functions, lengths = _executed(scripts, prefix)
        label = path.with_name(path.name.removesuffix(".json") + ".label.json")
        if label.is_file():
            got = json.loads(label.read_text())
            test = "::".join([_relative(str(got.get("file", "")), root), *map(str, got.get("titles") or [])])
            tests, coarse = ((test,) if test in allowed else ()), False
            if not got.get("titles"):  # a cut around a whole file (jest in band)
                tests, coarse = tuple(sorted(by_file.get(test, ()))), True
        else:
            tests = tuple(sorted(t for rel in functions for t in by_file.get(rel, ())))
            coarse = True
        if tests:
            cuts.append(Cut(tests=tests, coarse=coarse, functions=functions, lengths=lengths))
    return cuts


def coverage_map(src: Path, package_dirs: list[str], data: Path, allowed: set[str]) -> CoverageMap:
    """The map of the library under `src` (never its tests) from the coverage a run left at `data`."""
    from featdel.lang.javascript import syntax

    cuts = read_cuts(data, src, allowed)
    files = library_files(src, package_dirs)
    covered: list[Covered] = []
    total = executed_lines = 0
    for rel in files:
        source = (src / rel).read_bytes()
        found = syntax.symbols(source, rel)
        tests: dict[str, set[str]] = defaultdict(set)
        ran_lines: set[int] = set()
        units = _utf16_to_bytes(source)
        for cut in cuts:
            ran = cut.functions.get(rel)
            if not ran:
                continue
            exact = cut.lengths.get(rel) == len(units) - 1
            for start, end, name in ran:
                if exact:
                    owner = _innermost(found, units[min(start, len(units) - 1)], units[min(end, len(units) - 1)])
                else:
                    # the implementation, not a TS overload signature of the same name (no body)
                    named = [s for s in found if name and s.name == name and s.kind != "class"]
                    owner = next((s for s in named if s.body_start_byte < s.end_byte), named[0] if named else None)
                if owner is None:
                    continue
                ran_lines.update(range(owner.body_start_line, owner.end_line + 1))
                for sym in found:
                    if sym is owner or (sym.kind == "class" and sym.start_byte <= owner.start_byte
                                        and owner.end_byte <= sym.end_byte):
                        tests[sym.qualname].update(cut.tests)
        body_lines = {n for s in found if s.kind != "class" for n in range(s.body_start_line, s.end_line + 1)}
        total += len(body_lines)
        executed_lines += len(body_lines & ran_lines)
        for sym in found:
            covered.append(Covered(path=rel, qualname=sym.qualname, kind=sym.kind,
                                   lines=sym.end_line - sym.start_line + 1, tests=sorted(tests.get(sym.qualname, ()))))
    rate = round(100.0 * executed_lines / total, 1) if total else 0.0
    granularity = "file" if any(c.coarse for c in cuts) else "test"
    return CoverageMap(line_rate=rate, symbols=covered, granularity=granularity)


def library_files(src: Path, package_dirs: list[str]) -> list[str]:
    """The library's source files (relative POSIX paths) under its source roots, tests left out."""
    from featdel.lang.javascript import syntax

    out: list[str] = []
    for d in package_dirs:
        target = src / d
        paths = [target] if target.is_file() else syntax.source_files(target) if target.is_dir() else []
        for path in paths:
            rel = path.relative_to(src).as_posix()
            if not syntax.is_test_path(rel) and rel not in out:
                out.append(rel)
    return sorted(out)


def _executed(scripts: list[dict], prefix: str) -> tuple[dict[str, list[tuple[int, int, str]]], dict[str, int]]:
    functions: dict[str, list[tuple[int, int, str]]] = {}
    lengths: dict[str, int] = {}
    for script in scripts:
        url = str(script.get("url", ""))
        if not url.startswith(prefix) or "/node_modules/" in url:
            continue
        rel = url[len(prefix):]
        ran = []
        for fn in script.get("functions") or []:
            ranges = fn.get("ranges") or []
            if not ranges:
                continue
            start, end, count = ranges[0]["startOffset"], ranges[0]["endOffset"], ranges[0]["count"]
            if start == 0 and not fn.get("functionName"):
                lengths[rel] = max(lengths.get(rel, 0), end)  # the script itself
                continue
            if count > 0:
                ran.append((start, end, str(fn.get("functionName") or "")))
        functions[rel] = ran
    return functions, lengths


def _innermost(found, start_byte: int, end_byte: int):
    holders = [s for s in found if s.kind != "class" and s.start_byte <= start_byte and end_byte <= s.end_byte]
    return min(holders, key=lambda s: s.end_byte - s.start_byte, default=None)


def _utf16_to_bytes(source: bytes) -> list[int]:
    """Byte offset of every UTF-16 unit offset of the decoded text, plus the end."""
    text = source.decode("utf-8", "replace")
    if text.isascii():
        return list(range(len(source) + 1))
    table, pos = [], 0
    for ch in text:
        width = len(ch.encode("utf-8", "replace"))
        table += [pos] * (2 if ord(ch) > 0xFFFF else 1)
        pos += width
    return [*table, pos]


def _relative(path: str, src: Path) -> str:
    try:
        return Path(path).resolve().relative_to(src.resolve()).as_posix()
    except ValueError:
        return path

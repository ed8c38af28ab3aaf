"""Which tests execute which symbol: coverage.py dynamic contexts joined with tree-sitter spans.

In: a coverage data file recorded with one context per test node id (our pytest plugin
switches them), the env's checkout, and the set of tests allowed as reward (passing and not
flaky). Out: a `CoverageMap`: the package's line rate and, for every function, method and class
of the library (never its tests), the tests that run its body. Only body lines count: `def`
and decorator lines run at import, whichever test happens to import the module first.
A class is executed by the tests of its methods.

A test's setup phase has a context of its own (`<node id>|setup`): a fixture of class, module or
session scope runs in the setup of the first test that uses it, so the tests that reach a
symbol there (`Covered.in_setup`) stand for others that share the fixture without a context of
their own (featdel.pipeline.gates.select_tests widens them to their file).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from featdel.code.spans import is_test_path, python_files, symbols

SETUP = "|setup"  # what the pytest plugin (featdel_report.py) appends to a test's context in its setup


@dataclass(frozen=True, kw_only=True, slots=True)
class Covered:
    path: str
    qualname: str
    kind: str
    lines: int
    tests: list[str]
    in_setup: list[str] = field(default_factory=list)  # of `tests`, those that reached it in their setup


@dataclass(frozen=True, kw_only=True, slots=True)
class CoverageMap:
    line_rate: float  # percent of the package's statements executed by the suite
    symbols: list[Covered]
    # "test": each test's own coverage; "file": some tests share their file's (a runner that
    # could not cut coverage between tests, featdel.lang.javascript.coverage), so the map is coarser
    granularity: str = "test"

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> CoverageMap:
        data = json.loads(path.read_text())
        return cls(line_rate=data["line_rate"], symbols=[Covered(**s) for s in data["symbols"]],
                   granularity=data.get("granularity", "test"))


def library_files(src: Path, package_dirs: list[str]) -> list[Path]:
    files: list[Path] = []
    for d in package_dirs:
        target = src / d
        files += [target] if target.is_file() else python_files(target)
    return [f for f in files if not is_test_path(f.relative_to(src).as_posix())]


def build(src: Path, package_dirs: list[str], data_file: Path, allowed: set[str]) -> CoverageMap:
    import coverage

    data = coverage.CoverageData(basename=str(data_file))
    data.read()
    cov = coverage.Coverage(data_file=str(data_file), config_file=False)
    cov.load()
    statements = executed = 0
    covered: list[Covered] = []
    for file in library_files(src, package_dirs):
        try:
            _, stmts, _, missing, _ = cov.analysis2(str(file))
        except coverage.exceptions.CoverageException:
            continue  # not Python coverage can parse (e.g. a syntax it does not know)
        statements += len(stmts)
        executed += len(stmts) - len(missing)
        by_line = data.contexts_by_lineno(str(file)) if str(file) in data.measured_files() else {}
        rel = file.relative_to(src).as_posix()
        file_symbols = symbols(file.read_bytes(), rel)
        tests_of: dict[str, set[str]] = {}
        setup_of: dict[str, set[str]] = {}
        for sym in file_symbols:
            if sym.kind == "class":
                continue
            contexts = set()
            for line in range(sym.body_start_line, sym.end_line + 1):
                contexts.update(by_line.get(line, ()))
            tests_of[sym.qualname] = {c.removesuffix(SETUP) for c in contexts} & allowed
            setup_of[sym.qualname] = {c.removesuffix(SETUP) for c in contexts if c.endswith(SETUP)} & allowed
        for sym in file_symbols:
            if sym.kind == "class":
                prefix = sym.qualname + "."
                tests = set().union(*(t for q, t in tests_of.items() if q.startswith(prefix)))
                setup = set().union(*(t for q, t in setup_of.items() if q.startswith(prefix)))
            else:
                tests, setup = tests_of[sym.qualname], setup_of[sym.qualname]
            covered.append(Covered(path=rel, qualname=sym.qualname, kind=sym.kind, lines=sym.lines, tests=sorted(tests),
                                   in_setup=sorted(setup)))
    rate = 100.0 * executed / statements if statements else 0.0
    return CoverageMap(line_rate=round(rate, 2), symbols=covered)

"""The language seam: a tree's language is detected from its files (Python unless JavaScript or
TypeScript sources come with a package.json and no Python packaging), every registered language
provides every member of `featdel.lang.base.Language`, and Python through the seam is exactly the
functions featdel used before it (same symbols, files, tests, syntax verdicts, protected names,
recipe and runner), so its behaviour cannot have changed.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from featdel.code import spans
from featdel.env import recipe as py_recipe
from featdel.env.testrun import SuiteRunner
from featdel.grading import grade
from featdel.lang import JAVASCRIPT, LANGUAGES, PYTHON, detect_language, for_path, language
from featdel.lang.base import Edits, Language

ROOT = Path(__file__).resolve().parents[1]


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(("files", "expected"), [
    ({"package.json": "{}", "index.js": "module.exports = 1;\n"}, "javascript"),
    ({"package.json": "{}", "src/a.ts": "export const a = 1;\n", "test/a.test.ts": ""}, "javascript"),
    ({"package.json": "{}", "lib/x.mjs": "export {};\n", "scripts/build.py": "print(1)\n"}, "javascript"),
    ({"pyproject.toml": "[project]\nname='p'\n", "p/__init__.py": "", "package.json": "{}", "web/a.js": ""},
     "python"),  # a Python project that ships a little JavaScript
    ({"setup.py": "", "pkg/__init__.py": ""}, "python"),
    ({"package.json": "{}", "README.md": "no sources"}, "python"),
    ({"package.json": "{}", "node_modules/dep/index.js": "", "dist/a.js": ""}, "python"),  # vendored, built
    ({"index.js": "module.exports = 1;\n"}, "python"),  # no package.json
    ({"package.json": "{}", "types/index.d.ts": "export declare const a: number;\n"}, "python"),
])
def test_detect_language(tmp_path, files, expected):
    assert detect_language(_tree(tmp_path, files)).name == expected


def test_files_find_their_language_by_name():
    assert for_path("pkg/mod.py") is PYTHON
    for rel in ("a.js", "a.mjs", "a.cjs", "a.jsx", "a.ts", "a.mts", "a.cts", "a.tsx"):
        assert for_path(rel) is JAVASCRIPT
    assert for_path("README.md") is None
    assert language("javascript") is JAVASCRIPT
    with pytest.raises(ValueError, match="known: python, javascript"):
        language("cobol")


def _members(protocol) -> set[str]:
    return {n for n in dir(protocol) if not n.startswith("_")} | set(getattr(protocol, "__annotations__", {}))


@pytest.mark.parametrize("name", sorted(LANGUAGES))
def test_every_language_provides_the_whole_protocol(name):
    lang = LANGUAGES[name]
    assert lang.name == name
    for member in _members(Language):
        assert hasattr(lang, member), f"{name} lacks {member}"
        if callable(getattr(Language, member, None)):
            ours = inspect.signature(getattr(type(lang), member))
            theirs = inspect.signature(getattr(Language, member))
            assert list(ours.parameters) == list(theirs.parameters), f"{name}.{member}{ours} != {theirs}"
    if lang.edits is not None:
        for member in _members(Edits):
            assert hasattr(lang.edits, member), f"{name}.edits lacks {member}"


def test_python_is_the_old_functions(tmp_path):
    sample = sorted((ROOT / "featdel" / "deletion").glob("*.py"))[:6] + [ROOT / "featdel" / "code" / "spans.py"]
    for path in sample:
        source, rel = path.read_bytes(), path.relative_to(ROOT).as_posix()
        assert PYTHON.symbols(source, rel) == spans.symbols(source, rel)
        assert PYTHON.has_syntax_error(source, rel) is spans.has_syntax_error(source) is False
        assert str(PYTHON.parse(source, rel).root_node) == str(spans.parse(source).root_node)
    broken = b"def f(:\n    pass\n"
    assert PYTHON.has_syntax_error(broken, "x.py") is spans.has_syntax_error(broken) is True
    assert PYTHON.source_files(ROOT / "featdel" / "code") == spans.python_files(ROOT / "featdel" / "code")
    for rel in ("tests/test_a.py", "pkg/a_test.py", "conftest.py", "pkg/testing/x.py", "pkg/mod.py", "test.js"):
        assert PYTHON.is_test_path(rel) is spans.is_test_path(rel)
    assert PYTHON.edits is None and PYTHON.tamper_patterns == ()
    tree = _tree(tmp_path / "lib", {"pyproject.toml": "[project]\nname = 'lib'\nversion = '1'\n",
                                    "lib/__init__.py": "", "tests/test_x.py": "", "tox.ini": "[tox]\n",
                                    "lib/sitecustomize.py": "", "lib/x.pth": "", "node_modules/a/conftest.py": ""})
    assert PYTHON.recipe(tree) == py_recipe.detect(tree)
    assert PYTHON.protected_files(tree) == {"pyproject.toml", "tox.ini", "lib/sitecustomize.py", "lib/x.pth"}


def test_the_grader_reads_pythons_protected_names_from_its_language():
    from featdel.lang import python

    assert grade.PROTECTED_NAMES is python.PROTECTED_NAMES
    assert grade.PROTECTED_SUFFIXES is python.PROTECTED_SUFFIXES
    assert all(PYTHON.is_protected_name(n) for n in grade.PROTECTED_NAMES)


def test_python_runner_is_the_warm_suite_runner(tmp_path):
    from featdel.core.records import Recipe
    from featdel.env.envs import Env

    env = Env(root=tmp_path, recipe=Recipe(python="3.11", install=[], test_cmd=[], package_dirs=[]))
    runner = PYTHON.runner(env, backend=None)
    assert type(runner) is SuiteRunner and runner.warm and runner.env is env


def test_javascript_protected_files_and_patterns(tmp_path):
    tree = _tree(tmp_path / "pkg", {
        "package.json": "{}", "package-lock.json": "{}", "tsconfig.json": "{}", "tsconfig.build.json": "{}",
        "jest.config.js": "", "vitest.config.mts": "", ".mocharc.yml": "", "src/index.ts": "", "src/config.ts": "",
        "packages/a/package.json": "{}", "node_modules/x/package.json": "{}", "babel.config.cjs": ""})
    assert JAVASCRIPT.protected_files(tree) == {
        "package.json", "package-lock.json", "tsconfig.json", "tsconfig.build.json", "jest.config.js",
        "vitest.config.mts", ".mocharc.yml", "packages/a/package.json", "babel.config.cjs"}
    hostile = ["process.exit(0);", "delete require.cache[k];", "globalThis.it = fake;", "global['describe'] = x;",
               "const cp = require('child_process');", "Object.prototype.asymmetricMatch = () => true;",
               "fs.readFileSync('node_modules/pkg/index.js')", "process.on('exit', () => {});",
               "require('node:vm').runInThisContext(s)", "new Function('return 1')", "jest.fn()",
               "const rt = await import(['vi', 'test'].join(''));", "require('a' + 'b')", "import(name)",
               "rt.chai.Assertion.prototype.assert = function () {};", "module.require(x)",
               "Object.defineProperty(rt.chai.Assertion.prototype, 'assert', d)", "fs.readFileSync('/proc/' + pid + '/mem')",
               "const { createRequire } = require('module');", "process.ppid",
               # an outside red team's names, built or escaped (featdel.lang.javascript.folding)
               'import { getCurrentTest } from "@\\u0076itest/runner";', "const g = globalThis; g['before' + 'Each'](h);",
               "fs.readFileSync('/pr' + 'oc/' + pid + '/mem')", "const p = process; p[k](0);",
               "x[String.fromCharCode(118, 105) + 'test']", "await import(atob('dml0ZXN0'))", "t.fails = true;",
               "this.currentTest.fn = wrapped;", "rt[['after', 'Each'].join('')](f)",
               # the second round's: the global object walked for the runner's names and state
               "const k = Object.keys(globalThis).find((k) => k.length === 10 && k.slice(0, 3) === 'bef');",
               "const w = Object.getOwnPropertyNames(globalThis).find((k) => k.startsWith('__v'));",
               "Object.assign(t, { fails: true });", "const g = globalThis;", "global[name](fn)",
               "const A = require('assert'); A[k] = wrapper;", "require('node:assert').strictEqual = f;",
               "import * as A from 'node:assert';\nconst x = 1;\nObject.assign(A, { equal: f });"]
    fine = ["return a + b;", "const out = new Map();", "if (x.exitCode) return;", "items.forEach((it) => it.test());",
            "Foo.prototype.bar = function () {};", "module.exports = { add };", "import { x } from '../utils.js';",
            "const m = require('./lib/m.js');", "const { a } = await import(\"./a.mjs\");", "Foo.prototype.x === y",
            "Object.defineProperty(Foo.prototype, 'size', d)", "const path = '/api/proc';",
            "if (process && process.env.DEBUG) log(x);", "if (typeof process !== 'undefined') return;",
            "const s = 'a\\n' + 'b';", "if (a.fails === b) return;", "return ['x', 'y'].join(sep);",
            "const state = require('./state');\nstate.count = 1;", "if (typeof globalThis !== 'undefined') g = globalThis.x;",
            "const fails = items.filter(bad);"]
    for line in hostile:
        assert _js_findings(line), line
    for line in fine:
        assert not _js_findings(line), line
    assert {c.glob for c in JAVASCRIPT.leak_channels} >= {"node_modules/**", "**/*.map", "dist/**", "**/*.d.ts"}


def _js_findings(text: str) -> list[str]:
    from featdel.grading import tamper

    return [f.rule for f in tamper.analyse_fragment(text.split("\n"), "src/a.js",
                                                    {JAVASCRIPT.suffixes: JAVASCRIPT.tamper_patterns})]


def test_javascript_names_built_at_run_time_are_written_out_for_the_patterns():
    from featdel.lang.javascript.folding import fold

    assert fold('import("@\\u0076itest/runner")') == 'import("@vitest/runner")'
    assert fold("g['before' + 'Each']") == "g.beforeEach"
    assert fold("['vi', 'test'].join('')") == fold("'tsetiv'.split('').reverse().join('')") == '"vitest"'
    assert fold("String.fromCharCode(0x76, 105) + 'test'") == fold("atob('dml0ZXN0')") == '"vitest"'
    assert fold("Buffer.from('L3Byb2M=', 'base64').toString()") == '"/proc"'
    assert fold("return a + b; // it's") == "return a + b; // it's"


def test_a_name_split_over_added_lines_is_found_and_known_lines_never_join_them():
    from featdel.grading import tamper

    patterns = {JAVASCRIPT.suffixes: JAVASCRIPT.tamper_patterns}
    split = "const n = 'vi' +\n  'test';\nexport const x = 1;\n"
    found = tamper.scan({"src/a.js": ("export const x = 1;\n", split)}, patterns=patterns)
    assert any("runner-name" in f and "src/a.js:1" in f for f in found), found
    old = "function quit() {\n  process.exit(1);\n}\n"
    new = "function quit() {\n  process.exit(1);\n}\nexport const y = 2;\nexport const z = 3;\n"
    assert tamper.scan({"src/b.js": (old, new)}, patterns=patterns) == []


def test_the_layout_page_says_what_a_language_provides():
    text = (ROOT / "docs" / "layout.md").read_text()
    assert "featdel/lang/<name>/" in text and "featdel/lang/base.py" in text
    for member in _members(Language) - {"name", "suffixes"}:
        assert f"`{member}`" in text, member


def test_every_carried_file_of_a_js_task_is_read_as_javascript():
    """node runs a file of any suffix that a literal `require` names, and vite one that `import`
    names, whatever bytes it holds: an outside red team hid its hooks in `lib/hooks.dat` and
    behind a comment of invalid UTF-8, both unscanned before."""
    from featdel.grading import tamper
    from featdel.grading.grade import scan_patterns

    found = tamper.scan({"lib/hooks.dat": (None, b"module.exports = function () { this.currentTest.fn = w; };\n"),
                         "src/mark.ts": (None, b"// \xff\xfe\x00\nexport const t = getCurrentTest();\n")},
                        patterns=scan_patterns("javascript"))
    assert any(f.startswith("lib/hooks.dat:1: runner-name") for f in found), found
    assert any(f.startswith("src/mark.ts:1: not-utf8") for f in found), found
    assert any(f.startswith("src/mark.ts:2: runner-name") for f in found), found
    assert scan_patterns("python") == {}

"""JavaScript and TypeScript through the language seam: every edit a strategy makes still parses,
for tree-sitter and for node itself (`node --check`), and removing a definition takes its ES
and CommonJS export wiring with it so the package still loads (node loads it); a stubbed
TypeScript file still type-checks (tsc, installed once per session from the npm registry, or
the test says why it cannot).

The projects are made by the tests; their code is the tests' own, so node runs it on the host.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from featdel.core.records import Candidate
from featdel.deletion import quality
from featdel.deletion.base import NotApplicable, RolledBack, Tree
from featdel.deletion.registry import delete
from featdel.lang import JAVASCRIPT, detect_language
from featdel.lang.base import AlreadyStub, apply
from featdel.lang.javascript import edits, syntax

NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed")

CJS = """\
'use strict';

/**
 * Adds two numbers.
 */
function add(a, b) {
  const s = a + b;
  return s;
}

// multiplies
const mul = (a, b) => a * b;

const neg = function (x) { return -x; };

class Box extends Array {
  constructor(v) {
    super();
    this.v = v;
  }

  get value() { return this.v; }

  set value(v) {
    this.v = v;
  }

  static of(v) {
    return new Box(v);
  }
}

module.exports.twice = function (x) {
  return 2 * x;
};

exports.half = (x) => x / 2;

module.exports = {
  add,
  mul,
  negate: neg,
  Box,
  inc(x) { return x + 1; },
  dec: function (x) {
    return x - 1;
  },
};
"""

ESM = """\
/* licence header */

export function first(xs) {
  return xs[0];
}

export default function* count(n) {
  for (let i = 0; i < n; i++) yield i;
}

export const last = (xs) => xs[xs.length - 1];

export class Stack {
  #items = [];
  push(x) { this.#items.push(x); return this; }
  pop() {
    return this.#items.pop();
  }
  size = () => this.#items.length;
}

async function later(x) {
  await null;
  return x;
}

export { later, later as eventually };
"""

TS = """\
export function pick(x: string): string;
export function pick(x: number): number;
export function pick(x: string | number): string | number {
  return x;
}

export abstract class Shape<T> {
  constructor(protected readonly size: T) {}
  abstract area(): number;
  describe(prefix: string): string {
    return `${prefix} ${this.area()}`;
  }
}

export class Square extends Shape<number> {
  constructor(size: number) {
    super(size);
    if (size < 0) throw new RangeError("size");
  }
  area(): number {
    return this.size * this.size;
  }
  get side(): number { return this.size; }
  set label(value: string) {
    console.log(value);
  }
}

export const identity = <T,>(value: T): T => value;

export const toMap = (keys: string[]): Map<string, number> => {
  const out = new Map<string, number>();
  keys.forEach((k, i) => out.set(k, i));
  return out;
};

// no return types: a stub that only throws would infer void (unjs/scule's TS2394)
export function shout<T extends string>(x: T): Uppercase<T>;
export function shout(x: string) {
  return x.toUpperCase();
}

export class Box {
  width() {
    return 3;
  }
}

export const loud: string = shout("a");
export const doubled: number = new Box().width() * 2;
"""

TSX = """\
import React from "react";

export function Hello({ name }: { name: string }) {
  return <div className="hello">Hello {name}</div>;
}

export const List = ({ items }: { items: string[] }) => (
  <ul>{items.map((i) => <li key={i}>{i}</li>)}</ul>
);
"""


def _qualnames(source: str, path: str) -> list[tuple[str, str]]:
    return [(s.qualname, s.kind) for s in syntax.symbols(source.encode(), path)]


def test_symbols_of_commonjs():
    found = _qualnames(CJS, "lib.js")
    assert found == [("add", "function"), ("mul", "function"), ("neg", "function"), ("Box", "class"),
                     ("Box.constructor", "method"), ("Box.value", "method"), ("Box.value", "method"),
                     ("Box.of", "method"), ("twice", "function"), ("half", "function"), ("inc", "function"),
                     ("dec", "function")]
    add = syntax.symbols(CJS.encode(), "lib.js")[0]
    assert add.docstring.startswith("/**") and add.signature == "function add(a, b)"
    assert CJS.encode()[add.body_start_byte:].startswith(b"{\n  const s")
    assert (add.start_line, add.def_line, add.end_line) == (6, 6, 9)


def test_symbols_of_esm_typescript_and_tsx():
    assert _qualnames(ESM, "m.mjs") == [("first", "function"), ("count", "function"), ("last", "function"),
                                        ("Stack", "class"), ("Stack.push", "method"), ("Stack.pop", "method"),
                                        ("Stack.size", "method"), ("later", "function")]
    first = syntax.symbols(ESM.encode(), "m.mjs")[0]
    assert ESM.encode()[first.start_byte:].startswith(b"export function first")
    assert first.signature == "export function first(xs)"
    ts = syntax.symbols(TS.encode(), "shape.ts")
    assert [(s.qualname, s.kind) for s in ts] == [
        ("pick", "function"), ("pick", "function"), ("pick", "function"), ("Shape", "class"),
        ("Shape.constructor", "method"), ("Shape.area", "method"), ("Shape.describe", "method"), ("Square", "class"),
        ("Square.constructor", "method"), ("Square.area", "method"), ("Square.side", "method"),
        ("Square.label", "method"), ("identity", "function"), ("toMap", "function"), ("shout", "function"),
        ("shout", "function"), ("Box", "class"), ("Box.width", "method")]
    assert ts[0].body_start_byte == ts[0].end_byte  # an overload signature has no body
    assert ts[13].signature == "export const toMap = (keys: string[]): Map<string, number>"
    assert _qualnames(TSX, "hello.tsx") == [("Hello", "function"), ("List", "function")]
    assert not syntax.has_syntax_error(TSX.encode(), "hello.tsx")
    assert syntax.has_syntax_error(TS.encode(), "shape.js")  # types are not JavaScript


def test_files_and_tests_of_a_tree(tmp_path):
    for rel in ("src/a.js", "src/b.ts", "src/b.d.ts", "lib/c.min.js", "test/a.js", "src/a.test.js",
                "src/__tests__/x.tsx", "spec/y.mjs", "node_modules/dep/index.js", "dist/a.js", "coverage/x.js",
                "build/y.js", "test.js"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x;\n")
    rels = [p.relative_to(tmp_path).as_posix() for p in syntax.source_files(tmp_path)]
    assert rels == ["spec/y.mjs", "src/__tests__/x.tsx", "src/a.js", "src/a.test.js", "src/b.ts", "test/a.js",
                    "test.js"]
    assert [p for p in rels if not syntax.is_test_path(p)] == ["src/a.js", "src/b.ts"]
    # a root-level test-*.js is test code (object-inspect's test-core-js.js); deeper, it is source
    assert syntax.is_test_path("test-core-js.js") and syntax.is_test_path("test_util.mjs")
    assert not syntax.is_test_path("src/test-utils.js") and not syntax.is_test_path("testing.js")


class _OneFile:
    """featdel.lang.base.Files over one module."""

    root = Path("/nonexistent")

    def __init__(self, name: str, source: bytes):
        self.name, self.source = name, source

    def read(self, rel: str) -> bytes:
        return self.source

    def source_paths(self) -> list[str]:
        return [self.name]

    def symbols(self, rel: str):
        return syntax.symbols(self.source, rel)


def _node_check(tmp_path: Path, name: str, text: str) -> None:
    target = tmp_path / "check" / name
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    done = subprocess.run([NODE, "--check", str(target)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{name}:\n{text}\n{done.stderr}"


# node --check compiles without running: CommonJS inside the module wrapper, ES modules as
# modules. One node process does the same for many files (node --check takes one file a start).
_COMPILE_ALL = r"""
const fs = require("fs"), vm = require("vm");
const bad = [];
for (const file of process.argv.slice(1)) {
  const text = fs.readFileSync(file, "utf8");
  try {
    if (file.endsWith(".mjs")) new vm.SourceTextModule(text, { identifier: file });
    else vm.compileFunction(text, ["exports", "require", "module", "__filename", "__dirname"], { filename: file });
  } catch (e) { bad.push(file + ": " + e.message); }
}
if (bad.length) { console.error(bad.join("\n")); process.exit(1); }
"""


def _node_compiles(tmp_path: Path, outputs: dict[str, str]) -> None:
    folder = tmp_path / "compile"
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in outputs.items():
        (folder / name).write_text(text)
    done = subprocess.run([NODE, "--experimental-vm-modules", "--no-warnings", "-e", _COMPILE_ALL,
                           *(str(folder / n) for n in outputs)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


@needs_node
def test_the_batch_compile_fails_where_node_check_fails(tmp_path):
    for name, text in {"a.mjs": "export { nothere };\n", "b.cjs": "function (\n", "c.mjs": "return 1;\n"}.items():
        with pytest.raises(AssertionError):
            _node_compiles(tmp_path / name, {name: text})
        with pytest.raises(AssertionError):
            _node_check(tmp_path, name, text)
    _node_check(tmp_path, "d.cjs", "return 1;\n")  # a top-level return is CommonJS
    _node_compiles(tmp_path / "ok", {"d.cjs": "return 1;\n"})


@needs_node
@pytest.mark.parametrize(("name", "text"), [("lib.cjs", CJS), ("m.mjs", ESM)])
def test_every_stub_removal_and_variant_parses_for_tree_sitter_and_node(tmp_path, name, text):
    source = text.encode()
    every = syntax.symbols(source, name)
    outputs: dict[str, bytes] = {}
    view = _OneFile(name, source)
    for i, sym in enumerate(every):
        found = [s for s in every if s.qualname == sym.qualname]
        outputs[f"remove{i}"] = apply(source, edits.remove(source, found).splices)
        if sym.kind != "method":  # with the module's own exports of it (`export { later }`)
            outputs[f"remove{i}"] = JAVASCRIPT.edits.wired_removal(view, name, found).files[name].encode()
        if sym.kind == "class":
            continue
        try:
            outputs[f"stub{i}"] = apply(source, edits.stub(source, found).splices)
        except AlreadyStub:
            pass
        for v in edits.stub_variants(sym, source):
            outputs[f"variant{i}-{v.label}"] = apply(source, [edits.body_splice(sym, source, v.text)])
    assert len(outputs) > 3 * len(every)
    suffix = name.rsplit(".", 1)[1]
    for key, out in outputs.items():
        assert not syntax.has_syntax_error(out, name), f"{key}:\n{out.decode()}"
        assert out != source
    _node_check(tmp_path, f"remove0.{suffix}", outputs["remove0"].decode())
    _node_compiles(tmp_path, {f"{key}.{suffix}": out.decode() for key, out in outputs.items()})


def test_typescript_edits_parse_and_keep_signatures():
    source = TS.encode()
    every = syntax.symbols(source, "shape.ts")
    for sym in every:
        found = [s for s in every if s.qualname == sym.qualname]
        assert not syntax.has_syntax_error(apply(source, edits.remove(source, found).splices), "shape.ts")
        if sym.kind != "class" and sym.qualname != "Shape.constructor" and sym.body_start_byte < sym.end_byte:
            out = apply(source, edits.stub(source, found).splices).decode()
            assert not syntax.has_syntax_error(out.encode(), "shape.ts")
            assert sym.signature.split("(")[0] in out
    jsx = TSX.encode()
    for sym in syntax.symbols(jsx, "hello.tsx"):
        for text in [edits.stub_body(sym, jsx), *(v.text for v in edits.stub_variants(sym, jsx))]:
            assert not syntax.has_syntax_error(apply(jsx, [edits.body_splice(sym, jsx, text)]), "hello.tsx")
        assert not syntax.has_syntax_error(apply(jsx, edits.remove(jsx, [sym]).splices), "hello.tsx")
    picked = [s for s in every if s.qualname == "pick"]
    stubbed = apply(source, edits.stub(source, picked).splices).decode()
    assert stubbed.startswith("export function pick(x: string): string;\nexport function pick(x: number): number;\n"
                              "export function pick(x: string | number): string | number {\n"
                              '  throw new Error("not implemented");\n}\n')
    ctor = [s for s in every if s.qualname == "Square.constructor"]
    out = apply(source, edits.stub(source, ctor).splices).decode()
    assert '  constructor(size: number) {\n    super(size);\n    throw new Error("not implemented");\n  }' in out
    arrow = [s for s in every if s.qualname == "identity"]
    assert 'export const identity = <T,>(value: T): T => { throw new Error("not implemented"); };' in \
        apply(source, edits.stub(source, arrow).splices).decode()
    with pytest.raises(AlreadyStub):  # an empty body or an abstract signature deletes nothing
        edits.stub(source, [s for s in every if s.qualname in ("Shape.constructor",)])
    labels = {v.label: v.text for v in edits.stub_variants([s for s in every if s.qualname == "toMap"][0], source)}
    assert labels["return undefined"] == "{\n  return undefined as any;\n}"
    assert labels["return first argument"] == "{\n  return keys as any;\n}"
    setter = [s for s in every if s.qualname == "Square.label"][0]
    assert {v.text for v in edits.stub_variants(setter, source)} == {"{}"}  # a setter's value is dropped


def test_removal_takes_attached_comments_and_keeps_the_header():
    source = ESM.encode()
    every = syntax.symbols(source, "m.mjs")
    out = apply(source, edits.remove(source, [every[0]]).splices).decode()
    assert out.startswith("/* licence header */\n\nexport default function* count(n) {")
    cjs = CJS.encode()
    found = [s for s in syntax.symbols(cjs, "lib.js") if s.qualname in ("add", "mul")]
    out = apply(cjs, edits.remove(cjs, found).splices).decode()
    assert out.startswith("'use strict';\n\nconst neg = function") and "Adds two" not in out and "multiplies" not in out
    inline = [s for s in syntax.symbols(cjs, "lib.js") if s.qualname == "inc"]
    out = apply(cjs, edits.remove(cjs, inline).splices).decode()
    assert "  Box,\n  dec: function (x) {" in out


# -- strategies on created projects ------------------------------------------------------------


def _project(root: Path, files: dict[str, str], manifest: dict | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "package.json").write_text(json.dumps(manifest or {"name": "demo", "version": "1.0.0"}))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _loads(root: Path, entry: str, tmp: Path):
    """A check: the edits applied to a copy, node loads `entry` (and, for ESM, links it)."""
    def check(changes: dict[str, str | None]) -> bool | str:
        copy = tmp / f"copy{len(list(tmp.glob('copy*')))}"
        shutil.copytree(root, copy)
        for rel, text in changes.items():
            if text is None:
                (copy / rel).unlink()
            else:
                (copy / rel).write_text(text)
        script = f"import('./{entry}').then(m => console.log(Object.keys(m).sort().join(',')))"
        done = subprocess.run([NODE, "-e", script], cwd=copy, capture_output=True, text=True, timeout=60)
        return True if done.returncode == 0 else done.stderr.strip().splitlines()[-1] if done.stderr else "failed"
    return check


def _candidate(path: str, qualname: str, kind: str) -> Candidate:
    return Candidate(repo="demo", path=path, qualname=qualname, kind=kind, lines=3, tests=["t"])


ESM_BARREL = {
    "src/lib.mjs": "export function alpha(x) {\n  return x + 1;\n}\n\nexport function beta(x) {\n  return x * 2;\n}\n\n"
                   "function gamma() {\n  return 3;\n}\n\nexport { gamma, gamma as g };\nexport default gamma;\n",
    "src/more.mjs": "export const delta = () => 4;\n",
    "src/index.mjs": "export { alpha, beta } from './lib.mjs';\nexport { default as theGamma, g } from './lib.mjs';\n"
                     "export * from './more.mjs';\n",
    "index.mjs": "export { alpha as first, beta } from './src/index.mjs';\nexport * from './src/more.mjs';\n",
    "src/user.mjs": "import { beta } from './lib.mjs';\nexport const twice = (x) => beta(beta(x));\n",
    "test/lib.test.mjs": "import { alpha } from '../src/lib.mjs';\n",
}


@needs_node
def test_function_removal_takes_its_es_wiring_through_barrels(tmp_path):
    root = _project(tmp_path / "esm", ESM_BARREL)
    assert detect_language(root) is JAVASCRIPT
    check = _loads(root, "index.mjs", tmp_path)
    assert check({}) is True
    found = delete(root, _candidate("src/lib.mjs", "alpha", "function"), "function", check=check)
    assert found.wiring == ["src/index.mjs::alpha (re-export)", "index.mjs::first (re-export)"]
    assert found.files["src/index.mjs"].startswith("export { beta } from './lib.mjs';\n")
    assert found.files["index.mjs"].startswith("export { beta } from './src/index.mjs';")
    assert "alpha" not in found.files["src/lib.mjs"] and "test/lib.test.mjs" not in found.files
    assert check(found.files) is True
    # a default export, an alias and a named export: each goes from the barrel that passes it on
    found = delete(root, _candidate("src/lib.mjs", "gamma", "function"), "function", check=check)
    assert found.files["src/index.mjs"] == "export { alpha, beta } from './lib.mjs';\nexport * from './more.mjs';\n"
    assert "gamma" not in found.files["src/lib.mjs"]
    assert check(found.files) is True
    # used by a module that computes with it: not wiring, so the removal rolls back
    with pytest.raises(RolledBack):
        delete(root, _candidate("src/lib.mjs", "beta", "function"), "function", check=_loads(root, "src/user.mjs",
                                                                                              tmp_path))


CJS_BARREL = {
    "lib/math.js": "function add(a, b) {\n  return a + b;\n}\n\nfunction mul(a, b) {\n  return a * b;\n}\n\n"
                   "module.exports = { add, mul };\nmodule.exports.plus = add;\n",
    "lib/text.js": "exports.shout = (s) => s.toUpperCase() + '!';\nexports.whisper = (s) => s.toLowerCase();\n",
    "index.js": "const { add, mul } = require('./lib/math');\n\nmodule.exports = {\n  add,\n  mul,\n"
                "  shout: require('./lib/text').shout,\n  ...require('./lib/text'),\n};\n",
    "lib/lazy.js": "module.exports = function load() {\n  return require('./text');\n};\n",
}


@needs_node
def test_function_removal_takes_its_commonjs_wiring(tmp_path):
    root = _project(tmp_path / "cjs", CJS_BARREL)
    check = _loads(root, "index.js", tmp_path)
    assert check({}) is True
    found = delete(root, _candidate("lib/math.js", "add", "function"), "function", check=check)
    assert found.files["lib/math.js"] == "function mul(a, b) {\n  return a * b;\n}\n\nmodule.exports = { mul };\n"
    assert found.files["index.js"].startswith("const { mul } = require('./lib/math');\n\nmodule.exports = {\n  mul,\n")
    assert sorted(found.wiring) == ["index.js::add (module.exports)", "index.js::add (require)",
                                    "lib/math.js::add (module.exports)", "lib/math.js::plus (exports)"]
    assert check(found.files) is True
    # a missing CommonJS property loads (as undefined): the removal alone passes the check, and the
    # tests that call it fail; the wiring, when asked for, is found all the same
    found = delete(root, _candidate("lib/text.js", "shout", "function"), "function", check=check)
    assert set(found.files) == {"lib/text.js"} and found.wiring == []
    wired = JAVASCRIPT.edits.wired_removal(Tree.open(root), "lib/text.js", Tree.open(root).find("lib/text.js", "shout"))
    assert wired.labels == ["index.js::shout (module.exports)"]
    assert "shout" not in wired.files["index.js"] and "...require('./lib/text')" in wired.files["index.js"]
    assert check(wired.files) is True


@needs_node
def test_body_strategy_throws_and_the_package_still_loads(tmp_path):
    root = _project(tmp_path / "cjs", CJS_BARREL)
    check = _loads(root, "index.js", tmp_path)
    found = delete(root, _candidate("lib/math.js", "add", "function"), "body", check=check)
    assert found.stubbed_symbols == ["lib/math.js::add"] and found.removed == ["{\n  return a + b;\n}"]
    copy = tmp_path / "run"
    shutil.copytree(root, copy)
    (copy / "lib/math.js").write_text(found.files["lib/math.js"])
    done = subprocess.run([NODE, "-e", "try { require('./index.js').add(1, 2) } catch (e) { console.log(e.message) }"],
                          cwd=copy, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "not implemented"
    with pytest.raises(NotApplicable):  # test code is never a target
        delete(root, _candidate("test/x.test.js", "f", "function"), "body", check=check)


@needs_node
def test_file_removal_refuses_a_module_loaded_at_load_time(tmp_path):
    root = _project(tmp_path / "cjs", {**CJS_BARREL, "lib/unused.js": "exports.u = () => 1;\n"},
                    {"name": "demo", "main": "index.js"})
    check = _loads(root, "index.js", tmp_path)
    with pytest.raises(NotApplicable, match=r"index.js:1 loads lib/math.js"):
        delete(root, _candidate("lib/math.js", "", "file"), "file", check=check)
    with pytest.raises(NotApplicable, match="entry point"):
        delete(root, _candidate("index.js", "", "file"), "file", check=check)
    gone = delete(root, _candidate("lib/unused.js", "", "file"), "file", check=check)
    assert gone.files == {"lib/unused.js": None} and gone.deleted_symbols == ["lib/unused.js::u"]
    # text.js is required at load time by index.js, and inside a function by lazy.js
    with pytest.raises(NotApplicable, match="index.js:7 loads lib/text.js"):
        delete(root, _candidate("lib/text.js", "", "file"), "file", check=check)


@needs_node
def test_stub_variants_of_a_javascript_deletion(tmp_path):
    root = _project(tmp_path / "cjs", CJS_BARREL)
    check = _loads(root, "index.js", tmp_path)
    by_strategy = {}
    for strategy in ("body", "function"):
        deletion = delete(root, _candidate("lib/math.js", "add", "function"), strategy, check=check)
        variants = by_strategy[strategy] = quality.stub_variants(root, deletion)
        assert [v.label for v in variants] == list(edits.LABELS)
        for v in variants:
            text = v.files["lib/math.js"]
            assert "function add(a, b) {" in text and "return a + b" not in text
            assert set(v.files) == set(deletion.files)
            _node_check(tmp_path, f"{strategy}-{v.label.replace(' ', '_')}.js", text)
        assert "return a;" in variants[2].files["lib/math.js"]
        # the wiring a removal took out stays out, as Python's variants keep other files' edits
        if strategy == "function":
            assert variants[0].files["index.js"] == deletion.files["index.js"]
    equal = next(v for v in by_strategy["body"] if v.label == "equal_anything").files["lib/math.js"]
    probe = tmp_path / "probe"
    shutil.copytree(root, probe)
    (probe / "lib/math.js").write_text(equal)
    # jest's and vitest's isAsymmetric: `"asymmetricMatch" in value`, then a function under it
    script = ("const r = require('./lib/math').add(1, 2);"
              "(async () => { const a = await r; console.log(r.asymmetricMatch(3), r.asymmetricMatch('x'), a === r,"
              " 'asymmetricMatch' in r && typeof r.asymmetricMatch === 'function', 'then' in r) })()")
    done = subprocess.run([NODE, "-e", script], cwd=probe, capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["true", "true", "true", "true", "false"]  # matches anything, `await` settles


def test_labels_reach_the_verify_stage_ordering():
    assert quality.LABELS[: len(quality.PYTHON_LABELS)] == quality.PYTHON_LABELS
    assert set(edits.LABELS) <= set(quality.LABELS)


# -- TypeScript's own type check ----------------------------------------------------------------


@pytest.fixture(scope="session")
def tsc(tmp_path_factory) -> Path:
    """tsc from the npm registry, installed once per session (npm's cache makes a rerun quick)."""
    npm = shutil.which("npm")
    if npm is None or NODE is None:
        pytest.skip("npm is not installed")
    prefix = tmp_path_factory.mktemp("typescript")
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--ignore-scripts", "--prefix", str(prefix),
                           "typescript@5"], capture_output=True, text=True, timeout=300)
    binary = prefix / "node_modules" / ".bin" / "tsc"
    if done.returncode != 0 or not binary.exists():
        pytest.skip(f"typescript could not be installed from the npm registry: {done.stderr[-300:]}")
    return binary


def _type_checks(tsc: Path, folder: Path, files: dict[str, str]) -> str | None:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    (folder / "tsconfig.json").write_text(json.dumps({"compilerOptions": {
        "strict": True, "noEmit": True, "target": "ES2022", "module": "ESNext", "moduleResolution": "Bundler",
        "skipLibCheck": True, "types": []}, "include": list(files)}))
    done = subprocess.run([str(tsc), "-p", str(folder)], capture_output=True, text=True, timeout=300)
    return None if done.returncode == 0 else done.stdout + done.stderr


def test_stubbed_typescript_still_type_checks(tsc, tmp_path):
    source = TS.encode()
    assert _type_checks(tsc, tmp_path / "original", {"shape.ts": TS}) is None
    every = syntax.symbols(source, "shape.ts")
    files = {}
    for i, name in enumerate(dict.fromkeys(s.qualname for s in every if s.kind != "class")):
        found = [s for s in every if s.qualname == name]
        try:
            files[f"stub{i}.ts"] = apply(source, edits.stub(source, found).splices).decode()
        except AlreadyStub:
            continue
        for v in edits.stub_variants(found[-1], source):
            files[f"variant{i}_{v.label.replace(' ', '_')}.ts"] = apply(
                source, [edits.body_splice(found[-1], source, v.text)]).decode()
    assert len(files) > 30
    failed = _type_checks(tsc, tmp_path / "stubbed", files)
    assert failed is None, failed

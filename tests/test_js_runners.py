"""A JavaScript suite run in the sandbox reports what each test did, keyed by file and title path,
and nothing a test file does can make it report a pass it did not earn: load errors are kept
apart from failures, a file that exits at import has no tests, a forged record voids the run.

One install of the runners per session (mocha, jest, vitest, tape; node --test is node's),
shared as one env's node_modules; every project is a tree the test writes and mounts in the
env's place, as the grader mounts its start states. Needs node, npm and the npm registry.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from featdel.env.testrun import RunOptions
from featdel.lang.javascript import envs, runners
from featdel.lang.javascript.envs import NodeEnv
from featdel.sandboxes.local import LocalBackend

pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")

RUNNER_PACKAGES = ["mocha@11", "jest@30", "vitest@4", "tape@5"]


@pytest.fixture(scope="session")
def shared_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("jsenv")
    (root / "src").mkdir()
    (root / "package.json").write_text(json.dumps({"name": "featdel-js-runners", "version": "0.0.0", "private": True}))
    npm = ["npm", "install", "--no-audit", "--no-fund", "--ignore-scripts", "--cache", str(root / "npm-cache"),
           *RUNNER_PACKAGES]
    done = subprocess.run(npm, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return root


@pytest.fixture(scope="session")
def backend():
    backend = LocalBackend()
    if reason := backend.unavailable():
        pytest.skip(reason)
    return backend


def project(base: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text)
    return base


def env_for(root: Path, tree: Path) -> NodeEnv:
    return NodeEnv(root=root, recipe=envs.recipe(tree))


def run(root: Path, tree: Path, backend, **options):
    return runners.run_suite(env_for(root, tree), backend, RunOptions(timeout_s=120, **options), tree=tree)


LIB = "function add(a, b) { return a + b; }\nfunction mul(a, b) { let r = 0; for (let i = 0; i < b; i++) r = add(r, a); return r; }\n" \
      "module.exports = { add, mul };\n"
# A test file that, at import, finds the run's channel among its descriptors, writes a forged
# record that every test passed, and ends the process with status 0.
FORGER = """
const fs = require('fs');
for (const fd of fs.readdirSync('/proc/self/fd')) {
  try {
    if (fs.readlinkSync('/proc/self/fd/' + fd).includes('channel-')) {
      fs.writeSync(Number(fd), '1 ' + 'a'.repeat(64) + ' {"kind":"end","exitstatus":0}\\n');
    }
  } catch (e) {}
}
process.exit(0);
"""


def test_node_test_ids_outcomes_and_load_errors(shared_root, backend, tmp_path):
    tree = project(tmp_path, {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": "node --test test/"}}),
        "lib/index.js": LIB,
        "test/math.test.js": """const { describe, it, test } = require('node:test'); const assert = require('assert');
const { add, mul } = require('../lib');
describe('math', () => { it('adds', () => assert.equal(add(1, 1), 2)); it('is wrong', () => assert.equal(mul(2, 2), 5));
  describe('deep', () => { it('muls', () => assert.equal(mul(2, 3), 6)); }); });
test('later', { skip: true }, () => {});
test('cannot see the spec', () => assert.equal(process.env.FEATDEL_SPEC, undefined));
""",
        "test/broken.test.js": "throw new Error('no such module at load');\n",
        "test/exits.test.js": "require('node:test')('never runs', () => {}); process.exit(0);\n",
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    assert got.outcomes == {
        "test/math.test.js::math::adds": "passed",
        "test/math.test.js::math::is wrong": "failed",
        "test/math.test.js::math::deep::muls": "passed",
        "test/math.test.js::later": "skipped",
        "test/math.test.js::cannot see the spec": "passed",
    }
    assert got.collect_errors == ["test/broken.test.js"]
    assert "no such module at load" in got.collect_messages["test/broken.test.js"]
    assert got.report_exitstatus == 1 == got.exit_code
    picked = run(shared_root, tree, backend, tests=["test/math.test.js::math::deep::muls"])
    assert picked.outcomes == {"test/math.test.js::math::deep::muls": "passed"}


def test_mocha_hooks_grep_and_per_test_coverage(shared_root, backend, tmp_path):
    from featdel.lang.javascript.coverage import coverage_map

    tree = project(tmp_path / "t", {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": "mocha test/"}}),
        "lib/index.js": LIB,
        "test/a.test.js": """const assert = require('assert'); const { add, mul } = require('../lib');
describe('math', () => { it('adds', () => assert.equal(add(1, 1), 2)); it('muls', () => assert.equal(mul(2, 3), 6));
  it('is wrong', () => assert.equal(add(1, 1), 3)); it.skip('later', () => {}); });
describe('setup', () => { before(() => { throw new Error('hook broke'); }); it('never ran', () => {}); });
""",
        "test/b.test.js": "describe('b', () => { it('b1', () => {}); });\nthrow new Error('boom at load');\n",
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    assert got.outcomes == {
        "test/a.test.js::math::adds": "passed", "test/a.test.js::math::muls": "passed",
        "test/a.test.js::math::is wrong": "failed", "test/a.test.js::math::later": "skipped",
        "test/a.test.js::setup::never ran": "error",
    }
    assert got.collect_errors == ["test/b.test.js"]  # its b1 never counts
    wanted = ["test/a.test.js::math::adds", "test/a.test.js::math::muls"]
    data = tmp_path / "cov"
    picked = run(shared_root, tree, backend, tests=wanted, coverage_to=data)
    assert picked.outcomes == dict.fromkeys(wanted, "passed")
    cmap = coverage_map(tree, ["lib"], data, set(wanted))
    tests = {s.qualname: s.tests for s in cmap.symbols}
    assert tests == {"add": wanted, "mul": ["test/a.test.js::math::muls"]}
    assert cmap.granularity == "test"


def test_jest_outcomes_load_errors_and_selection(shared_root, backend, tmp_path):
    tree = project(tmp_path, {
        # `--env node` takes a value (vercel/ms tests so): read as a flag, jest fails to start
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": "jest --env node"}}),
        "lib/index.js": LIB,
        "__tests__/a.test.js": """const { add, mul } = require('../lib');
describe('math', () => { test('adds', () => expect(add(1, 1)).toBe(2)); test('is wrong', () => expect(mul(2, 2)).toBe(5));
  test.skip('later', () => {}); describe('deep', () => { test('muls', () => expect(mul(2, 3)).toBe(6)); }); });
""",
        "__tests__/b.test.js": "throw new Error('boom at load');\n",
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    assert got.outcomes == {
        "__tests__/a.test.js::math::adds": "passed", "__tests__/a.test.js::math::is wrong": "failed",
        "__tests__/a.test.js::math::later": "skipped", "__tests__/a.test.js::math::deep::muls": "passed",
    }
    assert got.collect_errors == ["__tests__/b.test.js"]
    assert not (tree / "node_modules").exists()  # no cache or install in the tree
    picked = run(shared_root, tree, backend, tests=["__tests__/a.test.js::math::deep::muls"])
    assert picked.outcomes == {"__tests__/a.test.js::math::deep::muls": "passed"}


def test_vitest_typescript(shared_root, backend, tmp_path):
    from featdel.lang.javascript.coverage import coverage_map

    tree = project(tmp_path, {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "type": "module",
                                    "scripts": {"test": "vitest run --reporter=dot"}}),
        # vite bundles a config file to node_modules/.vite-temp, read-only in the sandbox: vitest
        # 3.1+ loads it through vite's module runner instead (unjs/pathe, unjs/cookie-es)
        "vitest.config.ts": "import { defineConfig } from 'vitest/config';\nexport default defineConfig({ test: {} });\n",
        "src/math.ts": "export function add(a: number, b: number): number { return a + b; }\n"
                       # overload signatures come first; coverage ties the call to the body (unjs/scule)
                       "export function pad(s: string): string;\nexport function pad(s: string, n: number): string;\n"
                       "export function pad(s: string, n = 3): string {\n  const gap = n - s.length;\n"
                       "  return ' '.repeat(Math.max(0, gap)) + s;\n}\n",
        "test/math.test.ts": """import { describe, expect, test } from 'vitest';
import { add, pad } from '../src/math';
describe('math', () => { test('adds', () => expect(add(1, 1)).toBe(2)); test('is wrong', () => expect(add(1, 1)).toBe(3)); });
test.skip('later', () => {});
test('pads', () => expect(pad('a')).toBe('  a'));
""",
        "test/broken.test.ts": "const n: number = 1;\nthrow new Error('boom at load ' + n);\n",
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    assert got.outcomes == {"test/math.test.ts::math::adds": "passed", "test/math.test.ts::math::is wrong": "failed",
                            "test/math.test.ts::later": "skipped", "test/math.test.ts::pads": "passed"}
    assert got.collect_errors == ["test/broken.test.ts"]
    assert not (tree / "node_modules").exists()  # vite's cache stays out of the tree
    picked = run(shared_root, tree, backend, tests=["test/math.test.ts::math::adds"])
    assert picked.outcomes == {"test/math.test.ts::math::adds": "passed"}
    wanted = ["test/math.test.ts::math::adds", "test/math.test.ts::pads"]
    data = tmp_path / "cov"
    assert run(shared_root, tree, backend, tests=wanted, coverage_to=data).outcomes == dict.fromkeys(wanted, "passed")
    cmap = coverage_map(tree, ["src"], data, set(wanted))
    assert {(s.qualname, s.lines, tuple(s.tests)) for s in cmap.symbols} == {
        ("add", 1, ("test/math.test.ts::math::adds",)),
        *(("pad", lines, ("test/math.test.ts::pads",)) for lines in (1, 4)),  # two signatures, one body
    }
    assert cmap.line_rate > 50, cmap.line_rate  # the body's lines ran, not a signature's one


def test_tape_subtests_todo_and_load_errors(shared_root, backend, tmp_path):
    tree = project(tmp_path, {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": "tape 'test/**/*.js'"}}),
        "index.js": LIB,
        "test/a.js": """const test = require('tape'); const { add, mul } = require('../');
test('adds', (t) => { t.equal(add(1, 1), 2); t.end(); });
test('group', (t) => { t.test('muls', (st) => { st.equal(mul(2, 3), 6); st.end(); });
  t.test('is wrong', (st) => { st.equal(mul(2, 2), 5); st.end(); }); t.end(); });
test('someday', { todo: true }, (t) => { t.ok(false); t.end(); });
test('calls a deleted function', (t) => { t.equal(gone(1), 1); t.end(); });
test('nested throw', (t) => { t.test('inner', (st) => { throw new Error('not implemented'); }); t.end(); });
test('after the throws', (t) => { t.equal(add(2, 2), 4); t.end(); });
""",
        "test/nested/b.js": "throw new Error('boom at load');\n",
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    # a callback that throws fails its own test and the run goes on (tape's CLI would die there)
    assert got.outcomes == {"test/a.js::adds": "passed", "test/a.js::group": "passed",
                            "test/a.js::group::muls": "passed", "test/a.js::group::is wrong": "failed",
                            "test/a.js::someday": "skipped", "test/a.js::calls a deleted function": "failed",
                            "test/a.js::nested throw": "passed", "test/a.js::nested throw::inner": "failed",
                            "test/a.js::after the throws": "passed"}
    assert got.collect_errors == ["test/nested/b.js"]


@pytest.mark.parametrize("runner", ["mocha", "jest", "tape"])
def test_a_forged_record_or_an_early_exit_earns_no_pass(shared_root, backend, tmp_path, runner):
    script = {"mocha": "mocha test/", "jest": "jest", "tape": "tape test/*.js"}[runner]
    failing = {"mocha": "it('fails', () => { throw new Error('no'); });",
               "jest": "test('fails', () => { throw new Error('no'); });",
               "tape": "require('tape')('fails', (t) => { t.fail('no'); t.end(); });"}[runner]
    tree = project(tmp_path, {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": script}}),
        "test/a.test.js": failing + "\n",
        "test/z.test.js": FORGER,
    })
    got = run(shared_root, tree, backend)
    assert got.passed() == set()
    # in the launcher's process the forgery voids the run; in a jest worker it only ends that file
    assert got.broken is not None or got.outcomes.get("test/a.test.js::fails") == "failed"
    if runner != "jest":
        assert any("forged" in t for t in got.trips), got.trips


@pytest.mark.parametrize("runner", ["mocha", "tape"])
def test_library_code_cannot_rewrite_nodes_assert_in_the_runners_process(shared_root, backend, tmp_path, runner):
    """An outside red team's mocha win: the library replaced `assert.strictEqual` (names built at
    run time) with one that passes. The launcher freezes node's assert before the tree loads, so
    the write fails (sloppy code) or throws (strict code) and the assertion still fails."""
    script = {"mocha": "mocha test/", "tape": "tape test/*.js"}[runner]
    head = "const assert = require('node:assert');\nrequire('../lib/quiet.js');\nrequire('../lib/loud.js');\n"
    body = {"mocha": "it('adds', () => { assert.strictEqual(1 + 1, 3); });\n"
                     "it('strict', () => { assert.deepStrictEqual([1], [2]); });\n",
            "tape": "require('tape')('adds', (t) => { assert.strictEqual(1 + 1, 3); t.end(); });\n"
                    "require('tape')('strict', (t) => { assert.deepStrictEqual([1], [2]); t.end(); });\n"}[runner]
    tree = project(tmp_path, {
        "package.json": json.dumps({"name": "p", "version": "1.0.0", "scripts": {"test": script}}),
        "lib/quiet.js": "const A = require('as' + 'sert'); const k = 'strict' + 'Equal';\n"
                        "try { A[k] = function () {}; } catch (e) {}\n",
        "lib/loud.js": "'use strict';\nconst A = require('node:assert');\n"
                       "try { Object.assign(A, { deepStrictEqual() {} }); } catch (e) {}\n",
        "test/a.test.js": head + body,
    })
    got = run(shared_root, tree, backend)
    assert got.broken is None, got.output_tail
    assert got.outcomes == {"test/a.test.js::adds": "failed", "test/a.test.js::strict": "failed"}, got.outcomes


def test_build_env_locks_node_and_reuses(tmp_path, monkeypatch, backend):
    monkeypatch.setenv("FEATDEL_CACHE", str(tmp_path / "cache"))
    from featdel.env.sources import resolve

    repo = project(tmp_path / "repo", {
        "package.json": json.dumps({"name": "tiny", "version": "1.0.0", "scripts": {"test": "node --test"}}),
        "index.js": LIB,
        "test/index.test.js": "const test = require('node:test'); const assert = require('assert');\n"
                              "test('adds', () => assert.equal(require('..').add(2, 2), 4));\n",
    })
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "base"], cwd=repo, check=True)
    bare = tmp_path / "tiny.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    source = resolve(str(bare))  # a bare git directory is a source
    assert source.name == "tiny"
    recipe = envs.recipe(repo)
    assert recipe.test_cmd == ["node-test"] and recipe.package_dirs == ["index.js"]
    env = envs.build_env(source, recipe)
    assert env.recipe.lock[0] == f"node@{envs.node_version()}"
    assert (env.root / "package-lock.json").is_file() and (env.root / "ready.json").is_file()
    again = envs.build_env(source, recipe)
    assert again == env
    got = runners.run_suite(env, backend, RunOptions(timeout_s=60))
    assert got.outcomes == {"test/index.test.js::adds": "passed"}


def test_test_command_reads_scripts_through_wrappers():
    tc = envs.test_command
    assert tc({"scripts": {"test": "npm run tests-only", "tests-only": "nyc tape 'test/**/*.js'"}}) == ("tape", ["test/**/*.js"])
    assert tc({"scripts": {"test": "node test/index.js"}, "devDependencies": {"tape": "^5"}}) == ("tape", ["test/index.js"])
    assert tc({"scripts": {"test": "tsx --test test/a.test.ts"}}) == ("node-test", ["--import", "tsx", "test/a.test.ts"])
    assert tc({"scripts": {"test": "npm run lint && cross-env CI=1 vitest run"}}) == ("vitest", [])
    assert tc({"scripts": {"test": "echo none"}, "devDependencies": {"jest": "^29"}}) == ("jest", [])
    assert tc({}) == ("node-test", [])
    # pnpm and yarn run a binary by its name (unjs/defu: `pnpm lint && pnpm test:types && pnpm vitest run`)
    assert tc({"scripts": {"test": "pnpm lint && pnpm vitest run", "lint": "oxlint src"}}) == ("vitest", [])
    assert tc({"scripts": {"test": "yarn jest --ci"}}) == ("jest", ["--ci"])
    assert tc({"scripts": {"test": "pnpm exec mocha test/"}}) == ("mocha", ["test/"])
    assert envs.split_node_flags(["--import", "tsx", "test/", "--no-warnings"]) == (["--import", "tsx", "--no-warnings"], ["test/"])


def test_recipe_resolves_foreign_locks_loosely_and_adds_what_a_ts_jest_config_needs(tmp_path):
    tree = project(tmp_path / "a", {"package.json": json.dumps({"scripts": {"test": "vitest run"}}), "pnpm-lock.yaml": ""})
    assert [argv[4:] for argv in envs.recipe(tree).install] == [["--legacy-peer-deps", "install", "--package-lock-only"],
                                                                 ["--legacy-peer-deps", "ci"]]
    tree = project(tmp_path / "b", {"package.json": json.dumps({"scripts": {"test": "jest"}}), "package-lock.json": "{}",
                                    "jest.config.ts": "export default {};\n"})
    assert [argv[4:] for argv in envs.recipe(tree).install] == [["install", "--package-lock-only", "--save-dev", "ts-node@10"],
                                                                 ["ci"]]
    (tree / "package.json").write_text(json.dumps({"scripts": {"test": "jest"}, "devDependencies": {"ts-node": "^10"}}))
    assert [argv[4:] for argv in envs.recipe(tree).install] == [["ci"]]


def test_the_packages_own_copies_go_unless_a_test_tool_loads_them(tmp_path):
    """unbuild brings defu into defu's own node_modules, tape brings minimist into minimist's: a
    copy outside what the runner and its plugins load is removed (and leaves the lock entries),
    one the runner loads stays."""
    def lock(own: str, runner: str, packages: dict) -> Path:
        root = tmp_path / own
        top = {"devDependencies": {runner: "*", "unbuild": "*", "ts-jest": "*"}}
        (root / "node_modules").mkdir(parents=True)
        (root / "package.json").write_text(json.dumps({"name": own}))
        (root / "package-lock.json").write_text(json.dumps({"packages": {"": top, **packages}}))
        for rel in packages:
            (root / rel).mkdir(parents=True, exist_ok=True)
        return root

    pkgs = {"node_modules/vitest": {"version": "4.0.0", "dependencies": {"vite": "*"}}, "node_modules/vite": {"version": "7.0.0"},
            "node_modules/unbuild": {"version": "3.0.0", "dependencies": {"defu": "*", "mlly": "*"}},
            "node_modules/mlly": {"version": "1.0.0", "dependencies": {"defu": "*"}},
            "node_modules/mlly/node_modules/defu": {"version": "5.0.0"}, "node_modules/defu": {"version": "6.0.0"},
            "node_modules/ts-jest": {"version": "29.0.0", "dependencies": {"helper": "*"}},
            "node_modules/helper": {"version": "1.0.0", "dependencies": {"defu": "*"}}}
    root = lock("defu", "vitest", {k: v for k, v in pkgs.items() if k != "node_modules/helper"} | {
        "node_modules/ts-jest": {"version": "29.0.0"}})
    recipe = envs.recipe(root)
    assert envs.prune_own_copies(root, recipe) == ["node_modules/defu", "node_modules/mlly/node_modules/defu"]
    assert not (root / "node_modules/defu").exists() and (root / "node_modules/unbuild").is_dir()
    # a run tool (ts-jest) whose dependency loads the copy: it stays
    kept = lock("defu2", "vitest", {**pkgs, "node_modules/defu2": {"version": "1.0.0"},
                                    "node_modules/helper": {"version": "1.0.0", "dependencies": {"defu2": "*"}}})
    assert envs.prune_own_copies(kept, envs.recipe(kept)) == []
    tape = lock("minimist", "tape", {"node_modules/tape": {"version": "5.0.0", "dependencies": {"minimist": "*"}},
                                     "node_modules/minimist": {"version": "1.2.8"}, "node_modules/nyc": {"version": "15.0.0"},
                                     "node_modules/nyc/node_modules/minimist": {"version": "1.2.0"}})
    (tape / "package.json").write_text(json.dumps({"name": "minimist", "scripts": {"test": "tape test/*.js"}}))
    assert envs.prune_own_copies(tape, envs.recipe(tape)) == ["node_modules/nyc/node_modules/minimist"]
    assert (tape / "node_modules/minimist").is_dir()


@pytest.mark.slow
def test_a_real_npm_tarball_that_ships_its_tests(tmp_path, featdel_cache, backend):
    """minimist 1.2.8's tarball keeps its tape suite (test/*.js); needs the npm registry. The
    session's cache: tests/test_js_corpus.py installs the same env, once for both."""
    from featdel.env.sources import checkout, resolve

    source = resolve("npm:minimist@1.2.8")
    assert resolve("npm:minimist@1.2.8").commit == source.commit  # committed reproducibly
    tree = tmp_path / "tree"
    checkout(source, tree)
    recipe = envs.recipe(tree)
    assert recipe.test_cmd == ["tape", "test/**/*.js"] and recipe.package_dirs == ["index.js"]
    env = envs.build_env(source, recipe)
    got = runners.run_suite(env, backend, RunOptions(timeout_s=300))
    assert got.broken is None, got.output_tail
    assert len(got.passed()) >= 50 and set(got.outcomes.values()) == {"passed"}
    assert "test/bool.js::boolean groups" in got.passed()


# runner -> (test script, {test file: (text, the title path of its one test)}), in both module
# kinds where the runner has them; some tests sit in a describe block, some assert on a string.
CANARY_PROJECTS = {
    "mocha": ("mocha test/", {
        "test/a.test.js": ("const assert = require('assert');\n"
                           "describe('calc', () => { it('adds', () => { assert.equal(1 + 1, 2); }); });\n", "calc::adds"),
        "test/b.test.mjs": ("import assert from 'assert';\nit('muls', () => assert.equal(2 * 3, 6));\n", "muls")}),
    "jest": ("jest", {"__tests__/a.test.js": (
        "describe('calc', () => {\n  test('adds', () => {\n    expect(1 + 1).toBe(2);\n    expect('a' + 'b').toEqual('ab');\n  });\n});\n",
        "calc::adds")}),
    "vitest": ("vitest run", {"test/a.test.ts": (
        "import { test, expect } from 'vitest';\ntest('adds', () => expect(1 + 1).toBe(2));\n", "adds")}),
    "tape": ("tape test/*.js", {"test/a.js": (
        "const test = require('tape');\ntest('adds', (t) => { t.equal(1 + 1, 2); t.same(['a'], ['a']); t.end(); });\n",
        "adds")}),
    "node-test": ("node --test test/", {
        "test/a.test.js": ("const test = require('node:test');\ntest('adds', () => {});\n", "adds"),
        "test/b.test.mjs": ("import test from 'node:test';\nimport assert from 'node:assert';\n"
                            "test('muls', () => { assert.strictEqual(String(2 * 3), '6'); });\n", "muls")}),
}
KINDS = {"must_fail": "failed", "must_pass": "passed", "fresh": "failed", "perturbed": "failed"}


@pytest.mark.parametrize("runner", sorted(CANARY_PROJECTS))
def test_the_graders_canaries_run_as_planted_in_every_runner(runner, shared_root, backend, tmp_path):
    """What featdel.lang.javascript.canaries adds runs in the runner as the grader expects: each
    must_fail canary and each fresh or perturbed variant fails, each must_pass one passes, a twin
    agrees with its test (in the same describe block), and the file's own test still runs."""
    from featdel.lang.javascript import canaries

    script, files = CANARY_PROJECTS[runner]
    pkg = {"name": "p", "version": "1.0.0", "scripts": {"test": script}}
    tree = project(tmp_path, {"package.json": json.dumps(pkg), **{rel: text for rel, (text, _) in files.items()}})
    own = [f"{rel}::{title}" for rel, (_, title) in files.items()]
    planted = canaries.plant(tree, own, runner)
    kinds = sorted(kind for _, kind, _ in planted)
    asserting = sum("assert" in text or "expect(" in text or "t.equal" in text for text, _ in files.values())
    assert kinds == sorted(["must_fail", "must_fail", "must_pass", "twin"] * len(files) + ["fresh", "perturbed"] * asserting)
    got = run(shared_root, tree, backend, tests=own + [node for node, _, _ in planted])
    assert got.broken is None and not got.collect_errors, (got.output_tail, got.collect_messages)
    assert {t: got.outcomes.get(t) for t in own} == dict.fromkeys(own, "passed")
    for node, kind, original in planted:
        want = got.outcomes.get(original) if kind == "twin" else KINDS[kind]
        assert got.outcomes.get(node) == want, (node, kind, got.outcomes)
        assert kind in ("must_fail", "must_pass") or node.rsplit("::", 1)[0] == original.rsplit("::", 1)[0]


@pytest.mark.parametrize("runner", sorted(CANARY_PROJECTS))
def test_held_out_variants_expect_what_the_reference_computes(runner, shared_root, backend, tmp_path):
    """featdel.lang.javascript.held_out in each runner: the capturing copies of a test, run on
    the reference, record the value of its assertion with one input changed; planted in another
    copy of the tree, the held-out variant expecting that value passes and its perturbed twin
    fails, beside the other canaries."""
    from featdel.lang.javascript import canaries, held_out

    script, files = CANARY_PROJECTS[runner]
    pkg = {"name": "p", "version": "1.0.0", "scripts": {"test": script}}
    own = [f"{rel}::{title}" for rel, (_, title) in files.items()]
    asserting = [f"{rel}::{title}" for rel, (text, title) in files.items() if "equal" in text.lower() or "toBe" in text]
    reference = project(tmp_path / "reference", {"package.json": json.dumps(pkg), **{r: t for r, (t, _) in files.items()}})
    found = held_out.capture(reference, own, runner, env_for(shared_root, reference).src)
    assert found is not None and sorted(e.nodes[0] for e, _ in found.by_key.values()) == sorted(asserting)
    got = run(shared_root, reference, backend, tests=found.ids)
    values = found.values(reference, got.outcomes)
    assert sorted(e.nodes[0] for e, _ in values) == sorted(asserting), (got.outcomes, got.output_tail)

    graded = project(tmp_path / "graded", {"package.json": json.dumps(pkg), **{r: t for r, (t, _) in files.items()}})
    planted = canaries.plant(graded, own, runner, held=values)
    held = [(node, original) for node, kind, original in planted if kind == "held_out"]
    assert sorted(o for _, o in held) == sorted(asserting)
    got = run(shared_root, graded, backend, tests=own + [node for node, _, _ in planted])
    assert got.broken is None and not got.collect_errors, (got.output_tail, got.collect_messages)
    for node, kind, original in planted:
        want = got.outcomes.get(original) if kind == "twin" else "passed" if kind == "held_out" else KINDS[kind]
        assert got.outcomes.get(node) == want, (node, kind, got.outcomes)


# runner -> (test script, test file, its text): one test call in a loop over a table, its title
# built from the row (`adds 1+2`, `adds 2+2`), inside a describe block where the runner has one;
# the function under test takes the row's values as arguments.
TABLE_ROWS = "[[1, 2, 3], [2, 2, 4]]"
ADD = "function add(x, y) { return x + y; }\n"
BUILT_TITLES = {
    "mocha": ("mocha test/", "test/a.test.js", f"const assert = require('assert');\n{ADD}describe('calc', () => {{\n"
              f"  for (const [a, b, s] of {TABLE_ROWS}) {{\n    it(`adds ${{a}}+${{b}}`, () => {{ assert.equal(add(a, b), s); }});\n"
              "  }\n});\n"),
    "jest": ("jest", "__tests__/a.test.js", f"{ADD}describe('calc', () => {{\n"
             f"  for (const [a, b, s] of {TABLE_ROWS}) {{\n    test(`adds ${{a}}+${{b}}`, () => {{ expect(add(a, b)).toBe(s); }});\n"
             "  }\n});\n"),
    "vitest": ("vitest run", "test/a.test.ts", "import { describe, test, expect } from 'vitest';\n"
               "function add(x: number, y: number): number { return x + y; }\ndescribe('calc', () => {\n"
               f"  for (const [a, b, s] of {TABLE_ROWS}) {{\n    test(`adds ${{a}}+${{b}}`, () => {{ expect(add(a, b)).toBe(s); }});\n"
               "  }\n});\n"),
    "tape": ("tape test/*.js", "test/a.js", f"const test = require('tape');\n{ADD}"
             f"for (const [a, b, s] of {TABLE_ROWS}) {{\n  test(`adds ${{a}}+${{b}}`, (t) => {{ t.equal(add(a, b), s); t.end(); }});\n}}\n"),
    "node-test": ("node --test test/", "test/a.test.js", "const test = require('node:test');\nconst assert = require('node:assert');\n"
                  f"{ADD}for (const [a, b, s] of {TABLE_ROWS}) {{\n"
                  "  test(`adds ${a}+${b}`, () => { assert.strictEqual(add(a, b), s); });\n}\n"),
}


@pytest.mark.parametrize("runner", sorted(BUILT_TITLES))
def test_tests_with_built_titles_get_twins_fresh_and_held_out_copies(runner, shared_root, backend, tmp_path):
    """A test call in a loop over a table (its title built from the row) gets its copies right
    after it, in the loop, so every row makes them too: one canary per F2P row, under the row's
    title and a suffix. Without them a flip of the known F2P ids would meet no copy. Its held-out
    pair changes an argument at run time (`add(a, b)` -> `add(_q(a), b)`); the reference's answer
    is recorded per row and looked up by the row's title."""
    from featdel.lang.javascript import canaries, held_out

    script, rel, text = BUILT_TITLES[runner]
    pkg = {"name": "p", "version": "1.0.0", "scripts": {"test": script}}
    path = "calc::" if runner in ("mocha", "jest", "vitest") else ""
    own = [f"{rel}::{path}adds 1+2", f"{rel}::{path}adds 2+2"]
    reference = project(tmp_path / "reference", {"package.json": json.dumps(pkg), rel: text})
    found = held_out.capture(reference, own, runner, env_for(shared_root, reference).src)
    got = run(shared_root, reference, backend, tests=found.ids)
    [(entry, rows)] = found.values(reference, got.outcomes)
    assert entry.built and sorted(rows) == ["adds 1+2", "adds 2+2"], (rows, got.outcomes, got.output_tail)

    tree = project(tmp_path / "graded", {"package.json": json.dumps(pkg), rel: text})
    planted = canaries.plant(tree, own, runner, held=[(entry, rows)])
    copies = [(node, kind, original) for node, kind, original in planted if original]
    from featdel.code.literals import DECOYS

    assert sorted(kind for _, kind, _ in copies) == sorted(["fresh", "held_out", "twin", *["perturbed"] * DECOYS] * 2), planted
    assert all(node.startswith(original + " ") for node, _, original in copies)
    got = run(shared_root, tree, backend, tests=own + [node for node, _, _ in planted])
    assert got.broken is None and not got.collect_errors, (got.output_tail, got.collect_messages)
    assert {t: got.outcomes.get(t) for t in own} == dict.fromkeys(own, "passed"), got.outcomes
    for node, kind, original in planted:
        want = got.outcomes.get(original) if kind == "twin" else "passed" if kind == "held_out" else KINDS[kind]
        assert got.outcomes.get(node) == want, (node, kind, got.outcomes)

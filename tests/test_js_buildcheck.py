"""The JS build check's entry load fails a candidate only when the original tree loads the same
entry: a package whose entry requires built output the checkout lacks (unjs/defu's lib/index.cjs
requires ../dist) keeps its deletions, and one whose original entry loads still rejects an edit
that breaks it. A created project tested with `node --test` (no dependencies to install), mined
once per module and checked in the local sandbox. Subtests lost because their parent test failed
midway are failures, not a suite that no longer runs. Needs node, npm and bubblewrap.
"""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")

UNBUILT = {
    "package.json": json.dumps({"name": "unbuilt", "version": "1.0.0", "main": "lib/index.cjs",
                                "scripts": {"test": "node --test test/"}}),
    # the published entry re-exports a build the checkout does not hold, as defu's and destr's do
    "lib/index.cjs": "module.exports = require('../dist/index.cjs');\n",
    "src/text.js": "function shout(s) {\n  const upper = s.toUpperCase();\n  return upper + '!';\n}\n\n"
                   "function whisper(s) {\n  const lower = s.toLowerCase();\n  return lower + '...';\n}\n\n"
                   "module.exports = { shout, whisper };\n",
    "test/text.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                         "const { shout, whisper } = require('../src/text.js');\n\n"
                         "test('shouts', () => assert.strictEqual(shout('hi'), 'HI!'));\n"
                         "test('shouts louder', () => assert.strictEqual(shout('a'), 'A!'));\n"
                         "test('whispers', () => assert.strictEqual(whisper('HI'), 'hi...'));\n",
    # subtests register while their parent runs: one that throws midway loses the ones after it
    "test/grouped.test.js": "const test = require('node:test');\nconst assert = require('node:assert');\n"
                            "const { shout, whisper } = require('../src/text.js');\n\n"
                            "test('grouped', async (t) => {\n"
                            "  await t.test('first', () => assert.strictEqual(whisper('A'), 'a...'));\n"
                            "  assert.strictEqual(shout('x'), 'X!');\n"
                            "  await t.test('second', () => assert.strictEqual(whisper('B'), 'b...'));\n"
                            "});\n",
}


@pytest.fixture(scope="module")
def unbuilt(tmp_path_factory, featdel_cache, js_backend):
    from conftest import mine_tiny
    from featdel.core.rundir import RunDir
    from featdel.pipeline.context import RepoContext

    run_dir, record = mine_tiny(tmp_path_factory, "unbuilt", UNBUILT, js_backend)
    return RepoContext.load(run_dir, RunDir(run_dir).latest_repos()[record.source])


def _edited(ctx, tmp_path, files: dict[str, str]):
    from featdel.code import trees

    tree = trees.copy_tree(ctx.original(), tmp_path / "t")
    for rel, text in files.items():
        (tree / rel).write_text(text)
    return tree


def test_an_entry_the_original_cannot_load_does_not_reject_a_deletion(unbuilt, js_backend, tmp_path):
    from featdel.lang.javascript import buildcheck

    stub = UNBUILT["src/text.js"].replace("  const lower = s.toLowerCase();\n  return lower + '...';\n", "  return undefined;\n")
    tree = _edited(unbuilt, tmp_path, {"src/text.js": stub})
    with unbuilt.runner(js_backend) as runner:
        assert buildcheck.entry(tree) == "lib/index.cjs"
        assert not buildcheck.original_loads(unbuilt.env, runner, "lib/index.cjs")  # ../dist is missing upstream
        assert unbuilt.build_check(tree, runner, set()) is None


def test_an_entry_the_original_loads_still_rejects_an_edit_that_breaks_it(unbuilt, js_backend, tmp_path):
    from featdel.lang.javascript import buildcheck

    pkg = json.loads(UNBUILT["package.json"]) | {"main": "src/text.js"}
    broken = UNBUILT["src/text.js"].replace("module.exports", "undefinedHelper();\nmodule.exports")
    tree = _edited(unbuilt, tmp_path, {"package.json": json.dumps(pkg), "src/text.js": broken})
    with unbuilt.runner(js_backend) as runner:
        assert buildcheck.original_loads(unbuilt.env, runner, "src/text.js")
        failed = unbuilt.build_check(tree, runner, set())
    assert failed is not None and failed[0] == "build.import" and "undefinedHelper" in failed[1], failed


def test_subtests_lost_with_their_failing_parent_are_failures_not_a_broken_suite(unbuilt, js_backend, tmp_path):
    from featdel.env.testrun import RunOptions
    from featdel.lang.javascript import buildcheck

    stub = UNBUILT["src/text.js"].replace("  const upper = s.toUpperCase();\n  return upper + '!';\n", "  return undefined;\n")
    tree = _edited(unbuilt, tmp_path, {"src/text.js": stub})
    second = "test/grouped.test.js::grouped::second"
    with unbuilt.runner(js_backend) as runner:
        run = runner.run_suite(RunOptions(), tree=tree)
        assert second not in run.collected and run.outcomes["test/grouped.test.js::grouped"] == "failed", run.outcomes
        assert buildcheck.lost_with_parent(second, run)
        assert not buildcheck.lost_with_parent("test/grouped.test.js::elsewhere::second", run)  # no ancestor ran
        assert unbuilt.build_check(tree, runner, set()) is None
    # the same subtest gone while its parent passed is a suite that changed: still rejected
    passed = dataclasses.replace(run, outcomes={**run.outcomes, "test/grouped.test.js::grouped": "passed"})
    assert not buildcheck.lost_with_parent(second, passed)

"""A JavaScript or TypeScript repository goes through featdel's stages and its one grader as a
Python one does: mining records its language, three baselines and a per-test coverage map;
deletions pass the language's build check; verified tasks are packaged with `language`; through
`featdel evaluate`, gold resolves and the empty patch scores 0; and every hostile patch (a
forged report, `process.exit(0)` at import, a planted runner config, an edited test, the test
API rebound on `globalThis`, a read of node_modules) earns 0. A source map or built copy of the
original in the tree keeps its deletions from becoming tasks.

Two projects the tests create (tests/js_projects.py), each mined, deleted, verified and packaged
once per session by tests/conftest.py (`mocha_run`, `ts_run`): a CommonJS library tested with
mocha (body stubs), and an ES-module TypeScript library tested with vitest and type-checked by
tsc (whole functions removed with their re-exports). Needs
node, npm, the npm registry (the runners install once per session into the session's featdel
cache) and bubblewrap.
"""

from __future__ import annotations

import json
import shutil

import pytest

pytestmark = pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="needs node and npm")


@pytest.fixture(scope="session")
def backend(js_backend):
    return js_backend


def _evaluate(run_dir, tmp_path, backend, patches: dict[str, str]):
    """`featdel evaluate` of one prediction per (model, patch) for every task; results by (model, task)."""
    from featdel.core import shards
    from featdel.grading.evaluate import evaluate

    preds = tmp_path / "preds.jsonl"
    rows = shards.task_rows(run_dir)
    preds.write_text("".join(json.dumps({"instance_id": r.instance_id, "model_name_or_path": model,
                                         "model_patch": r.patch if patch == "gold" else patch}) + "\n"
                             for r in rows for model, patch in patches.items()))
    return {(r.model_name_or_path, r.instance_id): r for r in evaluate(run_dir, preds, tmp_path / "r.jsonl", backend)}


def test_mining_records_the_language_baselines_and_per_test_coverage(mocha_run):
    from featdel.core.records import Baseline
    from featdel.core.rundir import RunDir
    from featdel.code.coverage_map import CoverageMap

    run_dir, record, _, _, steps = mocha_run
    assert record.language == "javascript"
    assert record.recipe.test_cmd[0] == "mocha" and any(e.startswith("node@") for e in record.recipe.lock)
    assert (record.passed, record.failed, record.flaky) == (7, 0, 0)
    assert [s for s in steps if s.startswith("baseline")] == ["baseline 1/3 (with coverage)", "baseline 2/3", "baseline 3/3"]
    baseline = Baseline.load(RunDir(run_dir).baseline(record.name))
    assert baseline.runs == 3 and "test/calc.test.js::Calc::adds" in baseline.tests
    cmap = CoverageMap.load(RunDir(run_dir).coverage(record.name))
    tests = {(s.path, s.qualname): s.tests for s in cmap.symbols}
    assert tests[("lib/text.js", "shout")] == ["test/text.test.js::text::shouts"]
    assert cmap.granularity == "test"


def test_mocha_tasks_are_verified_packaged_and_graded(mocha_run, backend, tmp_path):
    from featdel.core import shards

    run_dir, record, verdicts, tasks, _ = mocha_run
    verified = [v for v in verdicts if v.status == "verified"]
    assert tasks == len(verified) >= 2, [(v.deletion_id, v.rule, v.reason) for v in verdicts]
    rows = shards.task_rows(run_dir)
    assert {r.language for r in rows} == {"javascript"} and {r.language for r in shards.env_rows(run_dir)} == {"javascript"}
    assert all(t.startswith("test/") and "::" in t for r in rows for t in r.FAIL_TO_PASS)
    # the source map of lib/pad.js holds its original: a deletion there is a leak, never a task
    pad = [v for v in verdicts if v.target.startswith("lib/pad.js")]
    assert pad and all(v.status == "rejected" and v.stage == "leak" for v in pad), [(v.rule, v.reason) for v in pad]
    got = _evaluate(run_dir, tmp_path, backend, {"gold": "gold", "empty": ""})
    for row in rows:
        assert got[("gold", row.instance_id)].reward == 1.0, got[("gold", row.instance_id)].reason
        assert got[("empty", row.instance_id)].reward == 0.0


def test_typescript_tasks_with_vitest_and_tsc(ts_run, backend, tmp_path):
    from featdel.core import shards

    run_dir, record, verdicts, tasks, _ = ts_run
    assert record.language == "typescript" and record.recipe.test_cmd[0] == "vitest"
    assert record.passed == 4
    verified = [v for v in verdicts if v.status == "verified"]
    assert tasks == len(verified) >= 1, [(v.deletion_id, v.rule, v.reason) for v in verdicts]
    # a whole function goes with its re-export from the barrel; the tests that import it fail
    row = shards.task_rows(run_dir)[0]
    assert "src/index.ts" in row.deletion_patch and row.language == "typescript"
    got = _evaluate(run_dir, tmp_path, backend, {"gold": "gold", "empty": ""})
    for row in shards.task_rows(run_dir):
        assert got[("gold", row.instance_id)].reward == 1.0, got[("gold", row.instance_id)].reason
        assert got[("empty", row.instance_id)].reward == 0.0


def test_the_type_check_rejects_a_deletion_that_breaks_the_types(ts_run, backend, tmp_path):
    from featdel.pipeline.context import RepoContext
    from featdel.code import trees
    from featdel.core.rundir import RunDir

    run_dir, record, *_ = ts_run
    ctx = RepoContext.load(run_dir, RunDir(run_dir).latest_repos()[record.source])
    tree = trees.copy_tree(ctx.original(), tmp_path / "t")
    (tree / "src" / "text.ts").write_text((tree / "src" / "text.ts").read_text().replace(
        "export function shout(s: string): string {", "export function shout(s: number): string {\n  s = s + 1;"))
    with ctx.runner(backend) as runner:
        failed = ctx.build_check(tree, runner, set())
    assert failed is not None and failed[0] == "build.import" and "TS" in failed[1], failed


def _lib_patch(run_dir, instance: str, rel: str, text: str, *, new: bool = False) -> str:
    """A patch of the task's start state that writes `text` to `rel` (appended, or a new file)."""
    import tempfile
    from pathlib import Path

    from featdel.code import trees
    from featdel.core import shards

    row = next(r for r in shards.task_rows(run_dir) if r.instance_id == instance)
    env = next(e for e in shards.env_rows(run_dir) if e.env_id == row.env_id)
    with tempfile.TemporaryDirectory() as tmp:
        snapshot = Path(tmp) / "s.tar.gz"
        snapshot.write_bytes(env.snapshot)
        start = trees.start_state(snapshot, row.deletion_patch, Path(tmp) / "a")
        edited = trees.copy_tree(start, Path(tmp) / "b")
        target = edited / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text if new or not target.exists() else target.read_text() + text)
        return trees.diff_trees(start, edited)


FORGE = """
const fs = require('fs');
for (const fd of fs.readdirSync('/proc/self/fd')) {
  try {
    if (fs.readlinkSync('/proc/self/fd/' + fd).includes('channel')) {
      fs.writeSync(Number(fd), '0 ' + 'a'.repeat(64) + ' {"kind":"end","exitstatus":0}\\n');
    }
  } catch (e) {}
}
process.exit(0);
"""


def test_hostile_patches_earn_nothing(mocha_run, backend, tmp_path):
    from featdel.core import shards
    from featdel.grading.evaluate import load_tasks
    from featdel.grading.grade import grade

    run_dir, *_ = mocha_run
    row = next(r for r in shards.task_rows(run_dir) if any("calc" in t for t in r.FAIL_TO_PASS))
    test_file = row.FAIL_TO_PASS[0].split("::")[0]
    hostile = {
        "forged report": ("lib/calc.js", FORGE, False),
        "exit at import": ("lib/calc.js", "\nprocess.exit(0);\n", False),
        "planted mocharc": (".mocharc.json", json.dumps({"grep": "nothing-matches-this", "spec": []}), True),
        "planted jest config": ("jest.config.js", "module.exports = { testMatch: [] };\n", True),
        "edited test": (test_file, "\ndescribe('Calc', () => { it('adds', () => {}); });\n", True),
        "rebound it": ("lib/calc.js", "\nglobalThis.it = function () {};\nglobalThis.describe = function () {};\n", False),
        "reads node_modules": ("lib/calc.js", "\nmodule.exports = require('../node_modules/jsmath/lib/calc.js');\n", False),
        "reads a source map": ("lib/calc.js", "\nconst orig = JSON.parse(require('fs').readFileSync(__dirname + '/pad.js.map'));\n",
                               False),
    }
    # each on the start state, without the fix: a hack that earned anything would be a reward hack
    tasks = load_tasks(run_dir, tmp_path, backend=backend)
    task = tasks[row.instance_id]
    for label, (rel, text, new) in hostile.items():
        patch = _lib_patch(run_dir, row.instance_id, rel, text, new=new)
        for allow in (False, True):
            result = grade(task, patch, backend, allow_suspect=allow)
            assert result.reward == 0.0, (label, allow, result.status, result.reason)
        if label in ("planted mocharc", "planted jest config", "edited test"):
            assert rel in result.ignored, (label, result.ignored)
        if label in ("forged report", "exit at import", "rebound it", "reads node_modules", "reads a source map"):
            assert grade(task, patch, backend).status == "suspect", label


def test_show_materialize_and_the_evaluate_command_on_a_js_task(mocha_run, tmp_path):
    from typer.testing import CliRunner

    from featdel.cli.main import app
    from featdel.core import shards

    run_dir, *_ = mocha_run
    row = shards.task_rows(run_dir)[0]
    shown = CliRunner().invoke(app, ["show", str(run_dir), row.instance_id], prog_name="featdel")
    assert shown.exit_code == 0 and "javascript" in shown.output and row.FAIL_TO_PASS[0] in shown.output, shown.output
    made = CliRunner().invoke(app, ["materialize", str(run_dir), row.instance_id, str(tmp_path / "start")],
                              prog_name="featdel")
    assert made.exit_code == 0, made.output
    assert "node_modules/.bin/mocha" in made.output and (tmp_path / "start" / "lib" / "calc.js").is_file()
    assert not (tmp_path / "start" / "node_modules").exists()
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"instance_id": row.instance_id, "model_patch": row.patch, "model_name_or_path": "gold"}))
    done = CliRunner().invoke(app, ["evaluate", str(run_dir), "--predictions", str(preds), "--out", str(tmp_path / "r.jsonl")],
                              prog_name="featdel")
    assert done.exit_code == 0, done.output
    [result] = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert (result["status"], result["reward"]) == ("resolved", 1.0)


def test_similarity_reads_javascript_tokens(tmp_path):
    from featdel.deletion import quality
    from featdel.lang import language

    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "a.js").write_text(
        "function lru(cache, key, limit) {\n  const hit = cache.get(key);\n"
        "  if (hit !== undefined) { cache.delete(key); cache.set(key, hit); }\n"
        "  while (cache.size > limit) { cache.delete(cache.keys().next().value); }\n  return hit;\n}\n")
    renamed = ("function mru(store, name, max) {\n  const found = store.get(name);\n"
               "  if (found !== undefined) { store.delete(name); store.set(name, found); }\n"
               "  while (store.size > max) { store.delete(store.keys().next().value); }\n  return found;\n}\n")
    other = ("function area(w, h) {\n  if (w < 0 || h < 0) throw new Error('negative side');\n  const a = w * h;\n"
             "  return Math.round(a * 100) / 100 + 0;\n}\n")
    js = language("javascript")
    copied = quality.similarity([renamed], tmp_path, lang=js)
    assert copied.score >= quality.MAX_SIMILARITY and copied.nearest == "lib/a.js::lru"
    assert quality.similarity([other], tmp_path, lang=js).score < 0.5
    assert quality.similarity([renamed], tmp_path, lang=js, exclude={"lib/a.js::lru"}).score == 0.0


# Code of the patch in vitest's worker, names built at run time (an outside red team's wins on
# unjs/cookie-es before the JS canaries): a hook that flips every failed result to passed, and
# the assertion library's check made a no-op. The must_fail canaries pass under both.
FLIP = """
const rt: any = await import(["vi", "test"].join(""));
rt.afterEach((ctx: any) => { ctx.task.result.state = "pass"; ctx.task.result.errors = undefined; });
"""
NOOP = """
const rt2: any = await import("vi" + "test");
rt2.chai.Assertion.prototype.assert = function () {};
"""
# The flip made selective (the red team's next move): only results that fail the way the
# deletion makes them fail are flipped, so the must_fail canaries (an assertion, an error with a
# random message) still fail. The fresh and perturbed variants call the deleted function as the
# F2P test does, fail the same way, and come back passed.
SELECTIVE = """
const rt3: any = await import(["vi", "test"].join(""));
rt3.afterEach((ctx: any) => {
  const r = ctx.task.result;
  const deleted = (e: any) => /is not a function|is not defined|not implemented/.test(String(e && e.message));
  if (r && (r.errors || []).some(deleted)) { r.state = "pass"; r.errors = undefined; }
});
"""


def test_in_process_result_flips_earn_nothing_on_vitest(ts_run, backend, tmp_path):
    from featdel.core import shards
    from featdel.grading.evaluate import load_tasks
    from featdel.grading.grade import grade

    run_dir, *_ = ts_run
    row = shards.task_rows(run_dir)[0]
    task = load_tasks(run_dir, tmp_path, backend=backend)[row.instance_id]
    assert grade(task, row.patch, backend).reward == 1.0  # the canaries leave gold alone
    for label, text in (("flip", FLIP), ("no-op assert", NOOP)):
        patch = _lib_patch(run_dir, row.instance_id, "src/index.ts", text)
        result = grade(task, patch, backend, allow_suspect=True)
        assert result.reward == 0.0 and result.status == "suspect", (label, result.status, result.reason)
        assert any("must_fail canary" in f for f in result.findings), (label, result.findings)
    patch = _lib_patch(run_dir, row.instance_id, "src/index.ts", SELECTIVE)
    result = grade(task, patch, backend, allow_suspect=True)
    assert result.reward == 0.0 and result.status == "suspect", (result.status, result.reason)
    wrong = [f for f in result.findings if "canary" in f]
    assert wrong and not [f for f in wrong if "must_fail" in f], wrong  # only the variants see it
    assert any("fresh canary" in f or "perturbed canary" in f for f in wrong), wrong
    assert grade(task, patch, backend).status == "suspect"  # and the scan alone stops it: a built import


@pytest.mark.docker
def test_a_js_env_built_only_locally_is_refused_in_one_line_by_docker_grading(mocha_run, tmp_path):
    """The base image has no node: grading a locally mined JS task there would report the empty
    patch and gold alike as `broken` (exec /usr/bin/node: no such file); it says what to run.
    Here, not in tests/test_js_docker.py: that module's fixture points FEATDEL_CACHE at a cache it
    deletes, and the session's mocha_run must not be built inside it."""
    from featdel.grading.evaluate import load_tasks
    from tests.conftest_sandbox import sandbox_backend

    run_dir, *_ = mocha_run
    got = load_tasks(run_dir, tmp_path, backend=sandbox_backend("docker"))  # skips without an engine
    assert got and all(isinstance(v, str) and "has no image on this engine" in v
                       and f"featdel env build {run_dir} --sandbox docker" in v for v in got.values()), got


# Answers to exactly the visible F2P tests of tests/js_projects.py's TypeScript project, each in
# place of the deleted function's body: no forgery, no tampering, no feature.
# Off the table, NaN: a decoy of a small answer (featdel.code.literals.decoys, drawn at random
# within 98 of it) can be 0, and a table answering 0 then passed that perturbed copy (`suspect`,
# not `unresolved`) in a CI run of 2026-12-06. No decoy is NaN, and no string decoy has the
# input's length.
TABLES = {"shout": "return s === 'hi' ? 'HI!' : s;", "whisper": "return s === 'HI' ? 'hi...' : s;",
          "mean": "return xs.join() === '1,2,6' ? 3 : NaN;", "spread": "return xs.join() === '4,1,9' ? 8 : NaN;"}


def test_a_table_of_the_visible_answers_fails_the_held_out_variants(ts_run, backend, tmp_path):
    """The gold patch with the deleted function's body replaced by a table of the visible tests'
    answers passes every F2P and P2P test as written. The held-out variants (an input changed,
    the reference's answer expected: featdel.lang.javascript.held_out) make it unresolved, while
    gold still resolves."""
    import re
    from pathlib import Path

    from featdel.code import trees
    from featdel.core import shards
    from featdel.grading.evaluate import load_tasks
    from featdel.grading.grade import grade

    run_dir, *_ = ts_run
    tasks = load_tasks(run_dir, tmp_path, backend=backend)
    graded = 0
    for row in shards.task_rows(run_dir):
        task = tasks[row.instance_id]
        start = trees.start_state(task.snapshot, task.deletion_patch, tmp_path / row.instance_id / "start")
        table = trees.copy_tree(start, tmp_path / row.instance_id / "table")
        trees.apply_patch(table, row.patch)
        for rel in ("src/text.ts", "src/stats.ts"):
            text = (table / rel).read_text()
            for name, body in TABLES.items():
                if f"function {name}(" in row.patch:
                    text = re.sub(rf"(export function {name}\([^)]*\)[^{{]*\{{).*?(\n\}})", rf"\1\n  {body}\2", text, flags=re.S)
            (table / rel).write_text(text)
        patch = trees.diff_trees(start, table)
        assert patch and patch != row.patch
        result = grade(task, patch, backend)
        assert all(o == "passed" for o in result.fail_to_pass.values()), result.fail_to_pass  # the visible tests pass
        assert (result.status, result.reward) == ("unresolved", 0.0), (result.status, result.reason)
        assert "held-out variants" in result.reason, result.reason
        assert grade(task, row.patch, backend).reward == 1.0
        graded += 1
    assert graded >= 2

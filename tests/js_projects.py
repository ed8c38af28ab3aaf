"""Two small JavaScript/TypeScript projects, and how the tests build packaged runs of them (not a
test module): a CommonJS library tested with mocha (body stubs; one file ships a source map that
holds its original), and an ES-module TypeScript library tested with vitest and type-checked by
tsc (whole functions removed with their re-exports). `made` takes one through mine, delete,
verify and package; tests/conftest.py builds each once per session (`mocha_run`, `ts_run`), so
the pipeline, grader, learner and trainer tests share the same tasks.
"""

from __future__ import annotations

import json

from conftest import delete_and_verify, make_repo

MOCHA = {
    "package.json": json.dumps({"name": "jsmath", "version": "1.0.0", "main": "lib/index.js",
                                "scripts": {"test": "mocha test/"}, "devDependencies": {"mocha": "^11"}}),
    "lib/text.js": "function shout(s) {\n  const upper = s.toUpperCase();\n  return upper + '!';\n}\n\n"
                   "function whisper(s) {\n  const lower = s.toLowerCase();\n  return lower + '...';\n}\n\n"
                   "module.exports = { shout, whisper };\n",
    "lib/calc.js": "class Calc {\n  constructor(start = 0) {\n    this.value = start;\n  }\n\n"
                   "  add(n) {\n    this.value = this.value + n;\n    return this;\n  }\n\n"
                   "  double() {\n    this.value = this.value * 2;\n    return this;\n  }\n}\n\nmodule.exports = { Calc };\n",
    # shipped with a source map that holds the original: no deletion of it may become a task
    "lib/pad.js": "function padLeft(text, width) {\n  const missing = Math.max(0, width - text.length);\n"
                  "  return ' '.repeat(missing) + text;\n}\n\nmodule.exports = { padLeft };\n",
    "lib/index.js": "const { shout, whisper } = require('./text');\nconst { Calc } = require('./calc');\n"
                    "const { padLeft } = require('./pad');\n\nmodule.exports = { shout, whisper, Calc, padLeft };\n",
    "test/text.test.js": "const assert = require('assert');\nconst { shout, whisper } = require('../lib');\n\n"
                         "describe('text', () => {\n  it('shouts', () => assert.strictEqual(shout('hi'), 'HI!'));\n"
                         "  it('whispers', () => assert.strictEqual(whisper('HI'), 'hi...'));\n});\n",
    "test/calc.test.js": "const assert = require('assert');\nconst { Calc } = require('../lib');\n\n"
                         "describe('Calc', () => {\n  it('adds', () => assert.strictEqual(new Calc(1).add(2).value, 3));\n"
                         "  it('doubles', () => assert.strictEqual(new Calc(3).double().value, 6));\n"
                         "  it('chains', () => assert.strictEqual(new Calc().add(2).double().value, 4));\n});\n",
    "test/pad.test.js": "const assert = require('assert');\nconst { padLeft } = require('../lib');\n\n"
                        "describe('pad', () => {\n  it('pads', () => assert.strictEqual(padLeft('ab', 4), '  ab'));\n"
                        "  it('leaves long text', () => assert.strictEqual(padLeft('abcdef', 4), 'abcdef'));\n});\n",
}
MOCHA["lib/pad.js.map"] = json.dumps({"version": 3, "file": "pad.js", "sources": ["../src/pad.js"],
                                      "sourcesContent": [MOCHA["lib/pad.js"]], "mappings": "AAAA"})

TYPESCRIPT = {
    "package.json": json.dumps({"name": "tsmath", "version": "1.0.0", "type": "module",
                                "scripts": {"test": "vitest run", "typecheck": "tsc --noEmit"},
                                "devDependencies": {"vitest": "^4", "typescript": "^5"}}),
    "tsconfig.json": json.dumps({"compilerOptions": {"strict": True, "noEmit": True, "target": "es2022",
                                                     "module": "esnext", "moduleResolution": "bundler",
                                                     "skipLibCheck": True, "types": []},
                                 "include": ["src", "test"]}),
    "src/text.ts": "export function shout(s: string): string {\n  const upper = s.toUpperCase();\n  return `${upper}!`;\n}\n\n"
                   "export function whisper(s: string): string {\n  const lower = s.toLowerCase();\n"
                   "  return `${lower}...`;\n}\n",
    "src/stats.ts": "export function mean(xs: number[]): number {\n  const total = xs.reduce((a, b) => a + b, 0);\n"
                    "  return total / xs.length;\n}\n\n"
                    "export function spread(xs: number[]): number {\n  const sorted = [...xs].sort((a, b) => a - b);\n"
                    "  return sorted[sorted.length - 1] - sorted[0];\n}\n",
    "src/index.ts": "export { shout, whisper } from './text';\nexport { mean, spread } from './stats';\n",
    "test/text.test.ts": "import { describe, expect, it } from 'vitest';\nimport { shout, whisper } from '../src';\n\n"
                         "describe('text', () => {\n  it('shouts', () => expect(shout('hi')).toBe('HI!'));\n"
                         "  it('whispers', () => expect(whisper('HI')).toBe('hi...'));\n});\n",
    "test/stats.test.ts": "import { describe, expect, it } from 'vitest';\nimport { mean, spread } from '../src';\n\n"
                          "describe('stats', () => {\n  it('means', () => expect(mean([1, 2, 6])).toBe(3));\n"
                          "  it('spreads', () => expect(spread([4, 1, 9])).toBe(8));\n});\n",
}


def made(tmp_path_factory, name: str, files: dict[str, str], backend, strategies: list[str], max_candidates: int):
    """(run dir, mined record, verdicts, tasks packaged) of one project through every stage."""
    from featdel.core.records import RepoStatus
    from featdel.env.corpus import CorpusEntry
    from featdel.env.recipe import Overrides
    from featdel.pipeline.mine import Thresholds, mine
    from featdel.pipeline.package import package

    repo = make_repo(tmp_path_factory.mktemp(f"{name}-repo") / name, files)
    run_dir = tmp_path_factory.mktemp(f"{name}-run")
    steps: list[str] = []
    [record] = mine([CorpusEntry(source=str(repo), overrides=Overrides())], run_dir, backend=backend,
                    thresholds=Thresholds(min_passing=3, min_coverage=10.0), on_step=lambda s, step: steps.append(step))
    assert record.status == RepoStatus.MINED, record.reason
    verdicts = delete_and_verify(run_dir, backend, strategies=strategies, max_candidates=max_candidates, reruns=2)
    tasks, _ = package(run_dir)
    return run_dir, record, verdicts, tasks, steps

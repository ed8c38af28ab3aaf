'use strict';
// Start a JavaScript test runner for featdel: the outcome channel is set up before any code of the
// tree runs, then the runner runs in this process with featdel's reporter and nothing else.
//
// Run as `node [NODE_FLAGS] featdel_launch.cjs RUNNER OPTIONS_JSON` from a read-only directory
// outside the tree, with the tree as the working directory. RUNNER is mocha, jest, vitest,
// node-test or tape; OPTIONS_JSON holds the runner's own arguments, the test files and the
// selection (nothing secret: code under test may read process.argv). The host says where the
// run's spec is in $FEATDEL_SPEC, as for pytest (featdel/env/pytest_plugin/featdel_launch.py): a
// JSON file in the sealed directory holding the channel's name (a FIFO the host drains) and the
// key that signs each record. The launcher reads the spec, unlinks it and deletes the variable
// before anything of the tree loads, so process.env and /proc/self/environ name a file that is
// gone; the key lives only in the closure of `channel`.
//
// Outcomes come from the runner's own events (a reporter object featdel passes, never one the
// tree names): the records are `start`, then once the run is over `collected` (ids and load
// errors), one `test` per test and `end` with the exit status this process then exits with.
// A test file that ends the process early (process.exit(0) at import) leaves no `end`: the host
// reads a run with no report. Standard library only, besides the runner itself.

const fs = require('fs');
const path = require('path');
const crypto = require('crypto');

// Bound before any code under test runs: a later monkeypatch of these names changes nothing here.
const stringify = JSON.stringify;
const writeSync = fs.writeSync;
const createHmac = crypto.createHmac;
const exit = process.exit.bind(process);

const ADAPTERS = {
  mocha: './run_mocha.cjs',
  jest: './run_jest.cjs',
  vitest: './run_vitest.cjs',
  'node-test': './run_node_test.cjs',
  tape: './run_tape.cjs',
};

function channel(fd, key) {
  let seq = 0;
  let live = fd >= 0;
  return function emit(record) {
    const payload = stringify(record);
    if (fd < 0) process.stderr.write(`featdel-record ${payload}\n`); // no spec: a run by hand, unsigned
    if (!live) return;
    const mac = createHmac('sha256', key).update(`${seq}\n${payload}`).digest('hex');
    let line = Buffer.from(`${seq} ${mac} ${payload}\n`);
    seq += 1;
    try {
      while (line.length) line = line.subarray(writeSync(fd, line));
    } catch (err) {
      live = false; // the host sees a stream that stops: the run is void
    }
  };
}

// What the adapters report into: outcomes keyed by "path::title::...::title" (path relative to
// the working directory), load errors per file, all sent once the run is over.
function collector(cwd) {
  const tests = new Map();
  const errors = [];
  const rel = (file) => {
    const abs = path.resolve(cwd, String(file || '?'));
    return abs.startsWith(cwd + path.sep) ? abs.slice(cwd.length + 1).split(path.sep).join('/') : String(file);
  };
  return {
    rel,
    id(file, titles) {
      return [rel(file), ...titles.map((t) => String(t))].join('::');
    },
    test(file, titles, outcome, seconds, message) {
      let id = this.id(file, titles);
      if (message && (outcome === 'failed' || outcome === 'error')) {
        process.stdout.write(`${outcome.toUpperCase()} ${id}: ${String(message).split('\n')[0].slice(0, 300)}\n`);
      }
      if (tests.has(id)) {
        let n = 2;
        while (tests.has(`${id} [${n}]`)) n += 1;
        id = `${id} [${n}]`; // the same title twice in one file: numbered in run order
      }
      tests.set(id, { outcome, duration: typeof seconds === 'number' && seconds >= 0 ? seconds : 0 });
    },
    error(file, message) {
      errors.push({ nodeid: file ? rel(file) : '<session>', message: String(message || '').slice(0, 4000) });
    },
    finish(emit, fatal) {
      let status = fatal ? 2 : 0;
      for (const v of tests.values()) if (v.outcome === 'failed' || v.outcome === 'error') status = status || 1;
      if (errors.length) status = status || 1;
      emit({ kind: 'collected', ids: [...tests.keys()], errors });
      for (const [id, v] of tests) emit({ kind: 'test', id, outcome: v.outcome, duration: v.duration });
      emit({ kind: 'end', exitstatus: status });
      return status;
    },
  };
}

// The runner's package directory as the tree resolves it (node_modules of the tree or above).
function pkgDir(name, cwd) {
  for (let dir = cwd; ; dir = path.dirname(dir)) {
    const candidate = path.join(dir, 'node_modules', name);
    if (fs.existsSync(path.join(candidate, 'package.json'))) return candidate;
    if (path.dirname(dir) === dir) throw new Error(`featdel: ${name} is not installed in the environment`);
  }
}

function coverageHooks(dir) {
  if (!dir) return { start() {}, end() {} };
  const cut = require('./featdel_cov.cjs');
  return {
    start() { cut(dir, null); },
    end(file, titles) { cut(dir, { file: String(file), titles: titles.map(String) }); },
  };
}

// node's assert, the assertion library of most mocha, tape and node --test suites, frozen before
// any code of the tree loads: in the runners that run tests in this process (mocha, tape), a
// library cannot make `assert.strictEqual` a no-op (a write fails, or throws in strict code).
// The ESM `node:assert` and `assert/strict` are the same objects.
function freezeAssert() {
  for (const name of ['assert', 'assert/strict']) {
    const mod = require(name);
    Object.freeze(mod);
    if (mod.strict) Object.freeze(mod.strict);
  }
}

async function main() {
  const specPath = process.env.FEATDEL_SPEC || '';
  delete process.env.FEATDEL_SPEC;
  let spec = {};
  if (specPath) {
    spec = JSON.parse(fs.readFileSync(specPath, 'utf8'));
    try { fs.unlinkSync(specPath); } catch (err) { /* gone already */ }
  }
  const fd = spec.channel ? fs.openSync(spec.channel, fs.constants.O_WRONLY | fs.constants.O_NOFOLLOW) : -1;
  const emit = channel(fd, Buffer.from(spec.key || '00', 'hex'));
  const runner = process.argv[2];
  const options = JSON.parse(process.argv[3] || '{}');
  const cwd = process.cwd();
  const report = collector(cwd);
  emit({ kind: 'start', runner, node: process.version, config: spec.config || null });
  let fatal = false;
  freezeAssert();
  try {
    if (!ADAPTERS[runner]) throw new Error(`featdel: unknown runner ${runner}`);
    const run = require(ADAPTERS[runner]);
    await run({ cwd, options, report, pkgDir: (name) => pkgDir(name, cwd), coverage: coverageHooks(options.coverage) });
  } catch (err) {
    fatal = true;
    report.error(null, (err && err.stack) || String(err));
    process.stderr.write(`featdel: the ${runner} run failed: ${(err && err.stack) || err}\n`);
  }
  const status = report.finish(emit, fatal);
  exit(status); // open handles (a server a test left) must not keep the run alive
}

main();

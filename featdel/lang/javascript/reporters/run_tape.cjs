'use strict';
// tape, in the launcher's process, as tape's own CLI runs it (every file required in turn, one
// harness for all), but read through the Test objects rather than printed TAP: `require('tape')`
// from the tree gets tape behind a proxy that knows which file is loading, so every test it
// creates (and each subtest, through its 'test' event) is tied to its file. A test passes when
// every assertion it made held (todo assertions aside), fails otherwise, and is skipped when
// tape skips it. A file that throws while it loads is a load error of that file. A test whose
// callback throws is that test's failure, and the run goes on: tape's own CLI dies there (only a
// rejected promise is caught), which would make one deleted function's ReferenceError, or a
// stub's "not implemented", a run with no report rather than the failing tests it is; pytest
// records such an exception as the test's failure too. TAP still goes to stdout, for the run's log.

const Module = require('module');
const path = require('path');

// Test.prototype.run calls the callback unguarded; a throw ends the test as a failed assertion,
// as tape does for a rejected promise (ifError, then end), so its harness moves on to the next.
function catchThrows(Test) {
  const run = Test && Test.prototype && Test.prototype.run;
  if (typeof run !== 'function') return;
  Test.prototype.run = function featdelRun(...args) {
    try {
      return run.apply(this, args);
    } catch (err) {
      if (err instanceof Error || Object.prototype.toString.call(err) === '[object Error]') this.ifError(err);
      else this.fail(String(err));
      if (!this.calledEnd) this.end();
      return undefined;
    }
  };
}

module.exports = async function runTape({ cwd, options, report, pkgDir, coverage }) {
  const tape = require(pkgDir('tape'));
  catchThrows(require(path.join(pkgDir('tape'), 'lib', 'test.js')));
  let loading = null;
  const watched = [];
  const watch = (t, file, titles) => {
    const state = { file, titles, failed: false, message: '' };
    watched.push([t, state]);
    t.on('prerun', () => coverage.start());
    t.on('result', (r) => {
      if (r && typeof r === 'object' && !r.ok && !r.todo && !r.skip) {
        state.failed = true;
        state.message = state.message || r.name || 'assertion failed';
      }
    });
    t.on('test', (st) => watch(st, file, [...titles, st.name]));
    t.on('end', () => {
      state.ended = true;
      coverage.end(file, titles);
    });
    return t;
  };
  const wrap = (fn) => function featdelTape(...args) {
    const t = fn.apply(this, args);
    if (t && typeof t.on === 'function' && loading) watch(t, loading, [t.name]);
    return t;
  };
  const proxy = new Proxy(tape, {
    apply: (target, self, args) => wrap(target).apply(self, args),
    get: (target, key) => (['only', 'skip', 'test'].includes(key) ? wrap(target[key]) : target[key]),
  });
  const load = Module._load;
  Module._load = function featdelLoad(request, parent, isMain) {
    return request === 'tape' || request === 'tape/index.js' ? proxy : load.call(this, request, parent, isMain);
  };
  const finished = new Promise((resolve) => tape.onFinish(resolve));
  for (const file of (options.files || []).map((f) => path.resolve(cwd, f))) {
    loading = file;
    try {
      require(file);
    } catch (err) {
      report.error(file, (err && err.stack) || String(err));
    }
  }
  loading = null;
  if (watched.length) await finished;
  for (const [t, state] of watched) {
    const skipped = t._skip || t._todo;
    const outcome = skipped ? 'skipped' : state.failed ? 'failed' : state.ended ? 'passed' : 'error';
    report.test(state.file, state.titles, outcome, 0, state.message || (state.ended ? '' : 'the test never ended'));
  }
};

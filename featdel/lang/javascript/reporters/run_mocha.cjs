'use strict';
// mocha, in the launcher's process: the tree's options (.mocharc*, package.json "mocha", the test
// script's arguments) as mocha's own CLI reads them, its --require hooks and root hooks, then
// each spec file loaded on its own so one that throws at load is a load error of that file
// rather than the end of the run (mocha's CLI stops at the first). Outcomes come from the
// runner's events through featdel's reporter class, passed to mocha as an object; --reporter,
// --parallel and --watch of the tree are ignored. A selection runs with --grep on the escaped
// full titles.

const path = require('path');
const fs = require('fs');

function cliModule(dir, name) {
  for (const ext of ['.cjs', '.js']) {
    const file = path.join(dir, 'lib', 'cli', name + ext);
    if (fs.existsSync(file)) return require(file);
  }
  throw new Error(`featdel: this mocha has no lib/cli/${name}`);
}

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

module.exports = async function runMocha({ cwd, options, report, pkgDir, coverage }) {
  const dir = pkgDir('mocha');
  const exported = require(dir);
  const Mocha = typeof exported === 'function' ? exported : exported.Mocha || exported.default; // mocha 12: an ES module
  const argv = cliModule(dir, 'options').loadOptions([...(options.args || [])]);
  const helpers = cliModule(dir, 'run-helpers');
  const plugins = await helpers.handleRequires(argv.require || [], {
    ignoredPlugins: ['mochaGlobalSetup', 'mochaGlobalTeardown'],
  });
  Object.assign(argv, plugins);
  for (const key of ['reporter', 'reporter-option', 'reporterOption', 'reporterOptions', 'parallel', 'watch', 'grep', 'fgrep', 'invert']) {
    delete argv[key];
  }
  const mocha = new Mocha({ ...argv, reporter: reporterFor(report, coverage) });
  let files = options.files;
  if (!files || !files.length) {
    const collect = cliModule(dir, 'collect-files');
    const spec = [].concat(argv.spec || [], argv._ || []);
    const got = collect({ allowEmpty: true, ignore: argv.ignore || [], extension: argv.extension || [], file: argv.file || [],
      recursive: argv.recursive, sort: argv.sort, spec: spec.length ? spec.map(String) : ['./test'] });
    files = Array.isArray(got) ? got : got.files; // mocha 8 returned the list itself
  }
  const loaded = [];
  for (const file of files.map((f) => path.resolve(cwd, f))) {
    mocha.files = [file];
    try {
      await mocha.loadFilesAsync();
      loaded.push(file);
    } catch (err) {
      report.error(file, (err && err.stack) || String(err));
      const root = mocha.suite; // what the file registered before it threw does not run
      root.suites = root.suites.filter((s) => s.file !== file);
      root.tests = root.tests.filter((t) => t.file !== file);
    }
  }
  mocha.files = loaded;
  let grep = null;
  if (options.select && options.select.length) {
    grep = new RegExp(`^(?:${options.select.map((s) => escape(s.titles.join(' '))).join('|')})$`);
    mocha.grep(grep);
  }
  await new Promise((resolve) => {
    const runner = mocha.run(() => resolve());
    runner.on('end', () => {
      // A test whose before-hook failed never ran: it is an error, not a test that vanished.
      const walk = (suite) => {
        for (const t of suite.tests) {
          if (t.featdelDone || (grep && !grep.test(t.fullTitle()))) continue;
          report.test(t.file || suite.file, t.titlePath(), t.isPending() ? 'skipped' : 'error', 0);
          t.featdelDone = true;
        }
        suite.suites.forEach(walk);
      };
      walk(mocha.suite);
    });
  });
};

function reporterFor(report, coverage) {
  return function FeatdelReporter(runner) {
    const done = (t, outcome, err) => {
      if (t.featdelDone) return;
      t.featdelDone = true;
      report.test(t.file || (t.parent && t.parent.file), t.titlePath(), outcome, (t.duration || 0) / 1000,
        err && (err.message || String(err)));
    };
    runner.on('test', () => coverage.start());
    runner.on('test end', (t) => coverage.end(t.file || '', t.titlePath()));
    runner.on('pass', (t) => done(t, 'passed'));
    runner.on('pending', (t) => done(t, 'skipped'));
    runner.on('fail', (t, err) => {
      if (t.type === 'test') return done(t, 'failed', err);
      // a hook: an each-hook names the test it ran for; an all-hook's tests are swept at the end
      if (t.ctx && t.ctx.currentTest && /each/.test(t.title)) done(t.ctx.currentTest, 'error', err);
    });
  };
}

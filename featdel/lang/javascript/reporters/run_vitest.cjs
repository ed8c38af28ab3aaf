'use strict';
// vitest, through its Node API (startVitest from vitest/node) in the launcher's process, with
// featdel's reporter object as the only reporter: named explicitly, because vitest picks another
// default reporter when it thinks an agent runs it, and given as an object, so no file of the
// tree can stand in for it. Test files run in vitest's workers, never in this module scope. A
// module that failed to load (an error and no tests) is a load error of its file. A selection
// runs the files asked with a name pattern of the full titles; with coverage, a setup file of
// featdel's (featdel_vitest_setup.mjs) cuts V8's coverage around every test in the workers.

const fs = require('fs');
const path = require('path');
const { pathToFileURL } = require('url');

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

function entry(dir, sub) {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
  let target = pkg.exports && pkg.exports[sub];
  while (target && typeof target === 'object') target = target.import || target.default || target.node;
  return path.join(dir, target || 'dist/node.js');
}

function parseArgs(args) {
  const out = { filters: [], options: {} };
  for (let i = 0; i < args.length; i += 1) {
    const arg = String(args[i]);
    if (arg === 'run' && i === 0) continue;
    if (!arg.startsWith('-')) { out.filters.push(arg); continue; }
    const [key, value] = arg.split(/=(.*)/s);
    if (['--config', '-c', '--root', '-r', '--project', '--dir'].includes(key)) {
      const v = value !== undefined ? value : args[++i];
      out.options[{ '-c': 'config', '-r': 'root' }[key] || key.slice(2)] = String(v);
    } // other flags (reporters, watch, coverage) are featdel's to set
  }
  return out;
}

function titlesOf(testCase) {
  const titles = [testCase.name];
  for (let p = testCase.parent; p && p.type === 'suite'; p = p.parent) titles.unshift(p.name);
  return titles;
}

function legacyTasks(report, file, tasks, prefix) { // vitest 1 and 2: onFinished(files)
  for (const task of tasks || []) {
    const titles = [...prefix, task.name];
    if (task.type === 'suite') { legacyTasks(report, file, task.tasks, titles); continue; }
    const state = task.result && task.result.state;
    const outcome = task.mode === 'skip' || task.mode === 'todo' || state === 'skip' || state === 'todo'
      ? 'skipped' : state === 'pass' ? 'passed' : state === 'fail' ? 'failed' : 'error';
    const err = task.result && task.result.errors && task.result.errors[0];
    report.test(file, titles, outcome, ((task.result && task.result.duration) || 0) / 1000, err && err.message);
  }
}

function reporterFor(report) {
  let done = false;
  return {
    onTestRunEnd(modules) {
      if (done) return;
      done = true;
      for (const mod of modules) {
        const tests = [...mod.children.allTests()];
        const errors = typeof mod.errors === 'function' ? mod.errors() : [];
        if (errors.length && !tests.length) {
          report.error(mod.moduleId, errors.map((e) => e.stack || e.message).join('\n'));
          continue;
        }
        for (const t of tests) {
          const result = t.result();
          const outcome = result.state === 'passed' ? 'passed' : result.state === 'failed' ? 'failed'
            : result.state === 'skipped' ? 'skipped' : 'error';
          const err = (result.errors || [])[0];
          report.test(mod.moduleId, titlesOf(t), outcome, (t.diagnostic() || { duration: 0 }).duration / 1000,
            err && err.message);
        }
      }
    },
    onFinished(files) {
      if (done) return;
      done = true;
      for (const file of files || []) {
        const errors = (file.result && file.result.errors) || [];
        if (errors.length && !(file.tasks || []).length) {
          report.error(file.filepath, errors.map((e) => e.stack || e.message).join('\n'));
          continue;
        }
        legacyTasks(report, file.filepath, file.tasks, []);
      }
    },
  };
}

module.exports = async function runVitest({ cwd, options, report, pkgDir }) {
  const { startVitest } = await import(pathToFileURL(entry(pkgDir('vitest'), './node')).href);
  const parsed = parseArgs(options.args || []);
  const filters = options.files && options.files.length ? options.files : parsed.filters;
  const settings = {
    ...parsed.options, run: true, watch: false, reporters: [reporterFor(report)], coverage: { enabled: false },
    passWithNoTests: true,
  };
  // Vite bundles a vitest.config.ts / vite.config.ts to a temp file under node_modules/.vite-temp,
  // which the sandbox mounts read-only; vitest 3.1+ can load it through Vite's module runner
  // instead, writing nothing (unjs/pathe, unjs/cookie-es). Older vitest keeps Vite's bundler.
  const [major, minor] = JSON.parse(fs.readFileSync(path.join(pkgDir('vitest'), 'package.json'), 'utf8'))
    .version.split('.').map(Number);
  if (major > 3 || (major === 3 && minor >= 1)) settings.configLoader = 'runner';
  if (options.select && options.select.length) {
    settings.testNamePattern = `^(?:${options.select.map((s) => escape(s.titles.join(' '))).join('|')})$`;
  }
  if (options.coverage) settings.setupFiles = [path.join(__dirname, 'featdel_vitest_setup.mjs')];
  const vitest = await startVitest('test', filters, settings, { cacheDir: '/tmp/featdel-vite-cache' });
  if (vitest) await vitest.close();
};

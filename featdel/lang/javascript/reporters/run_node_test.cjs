'use strict';
// `node --test`, through node:test's run(): each test file runs in a child process (flags given
// before the launcher, such as `--import tsx`, reach the children through process.execArgv), and
// the events stream back to this process, where featdel folds them into outcomes. A file is a
// test of its own in node's model: featdel counts only the tests inside it, and a file that fails
// by itself (it threw at load, or exited non-zero) is a load error of that file. So a test file
// that exits 0 at import has no tests, never a pass. Files come from the host (the test script's
// arguments, expanded there); a selection runs the files of the ids asked.

module.exports = async function runNodeTest({ cwd, options, report }) {
  const { run } = require('node:test');
  const path = require('path');
  const files = (options.files || []).map((f) => path.resolve(cwd, f));
  const stream = run({ files: files.length ? files : undefined, concurrency: options.concurrency || 1 });
  const output = new Map(); // file -> the end of what its process wrote to stderr
  const stacks = new Map(); // file -> names by nesting, from test:start (always in declaration order)
  for await (const event of stream) {
    const data = event.data || {};
    const file = data.file;
    if (!file) continue;
    if (event.type === 'test:stderr') {
      output.set(file, ((output.get(file) || '') + String(data.message || '')).slice(-4000));
      continue;
    }
    if (event.type === 'test:start') {
      const stack = stacks.get(file) || [];
      stack.length = data.nesting;
      stack.push(data.name);
      stacks.set(file, stack);
      continue;
    }
    if (event.type !== 'test:pass' && event.type !== 'test:fail') continue;
    const details = data.details || {};
    if (data.nesting === 0 && path.resolve(cwd, data.name) === file) {
      if (event.type === 'test:fail') {
        const err = details.error || {};
        const why = (err.cause && (err.cause.stack || err.cause.message)) || err.message || 'the file failed';
        report.error(file, `${err.failureType || 'failed'}: ${why}\n${output.get(file) || ''}`.trim());
      }
      continue;
    }
    if (details.type === 'suite') continue; // describe(): its tests are reported one by one
    const titles = [...(stacks.get(file) || []).slice(0, data.nesting), data.name];
    const outcome = data.skip !== undefined || data.todo !== undefined
      ? 'skipped' : event.type === 'test:pass' ? 'passed' : 'failed';
    const err = details.error && (details.error.cause || details.error);
    report.test(file, titles, outcome, (details.duration_ms || 0) / 1000, err && (err.message || String(err)));
  }
};

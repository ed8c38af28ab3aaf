'use strict';
// jest, through its runCLI in the launcher's process: `--ci`, no watchman, no watch, the cache in
// the sandbox's /tmp (never the tree), and featdel's reporter as the only reporter
// (featdel_jest_reporter.cjs: jest requires it by path in this process, where the launcher has
// already handed it the collector; test files run in jest's workers or its module registry, not
// in this module scope). A suite that fails to run (it threw at load, or does not compile) is a
// load error of its file. The test script's arguments are read for the config and the test path
// patterns; a selection runs the files asked with a name pattern of their full titles. With
// coverage, jest runs in band so the cuts fall between files.

const path = require('path');

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// jest's own short names, and the options that read the next word as their value (`--env node`:
// vercel/ms tests with `jest --env node`).
const ALIASES = { c: 'config', i: 'runInBand', w: 'maxWorkers', env: 'testEnvironment', t: 'testNamePattern' };
const TAKES_VALUE = new Set(['config', 'rootDir', 'testEnvironment', 'testPathPattern', 'testPathPatterns',
  'testPathIgnorePatterns', 'testMatch', 'testRegex', 'testTimeout', 'maxWorkers', 'selectProjects', 'roots',
  'preset', 'seed', 'shard', 'testRunner', 'testNamePattern', 'moduleDirectories', 'setupFiles',
  'setupFilesAfterEnv', 'maxConcurrency', 'testEnvironmentOptions', 'outputFile', 'coverageDirectory']);

function parseArgs(args) {
  const argv = { _: [] };
  for (let i = 0; i < args.length; i += 1) {
    const arg = String(args[i]);
    if (!arg.startsWith('-')) { argv._.push(arg); continue; }
    let [key, value] = arg.replace(/^--?/, '').split(/=(.*)/s);
    key = key.replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    key = ALIASES[key] || key;
    if (value === undefined) {
      const next = args[i + 1];
      if (TAKES_VALUE.has(key) && next !== undefined) { value = String(next); i += 1; } else value = true;
    }
    if (key.startsWith('no') && value === true) { argv[key[2].toLowerCase() + key.slice(3)] = false; continue; }
    argv[key] = value === 'true' ? true : value === 'false' ? false : value;
  }
  return argv;
}

module.exports = async function runJest({ cwd, options, report, pkgDir, coverage }) {
  const jest = require(pkgDir('jest'));
  const reporter = path.join(__dirname, 'featdel_jest_reporter.cjs');
  require(reporter).bind(report, coverage);
  const argv = parseArgs(options.args || []);
  for (const key of ['coverage', 'collectCoverage', 'watch', 'watchAll', 'reporters', 'json', 'outputFile',
    'testNamePattern', 't', 'onlyChanged', 'o', 'changedSince', 'lastCommit', 'cache', 'cacheDirectory']) delete argv[key];
  Object.assign(argv, {
    $0: 'jest', ci: true, watchman: false, watch: false, watchAll: false, reporters: [reporter],
    cacheDirectory: '/tmp/featdel-jest-cache', passWithNoTests: true, coverage: false,
  });
  if (options.files && options.files.length) {
    argv._ = options.files.map((f) => path.resolve(cwd, f));
    argv.runTestsByPath = true;
  }
  if (options.select && options.select.length) {
    argv.testNamePattern = `^(?:${options.select.map((s) => escape(s.titles.join(' '))).join('|')})$`;
  }
  if (options.coverage) argv.runInBand = true;
  await jest.runCLI(argv, [cwd]);
};

// featdel's vitest setup file, added only to coverage runs: cuts V8's coverage around every test
// inside vitest's worker (featdel_cov.cjs), labelled with the test's file and title path, so the
// coverage of a vitest suite is per test, as a mocha one is. Nothing here reports outcomes.
import { afterEach, beforeEach } from 'vitest';
import { createRequire } from 'node:module';

const cut = createRequire(import.meta.url)('./featdel_cov.cjs');
const dir = process.env.NODE_V8_COVERAGE;

beforeEach(() => {
  if (dir) cut(dir, null);
});

afterEach((context) => {
  if (!dir) return;
  const task = context.task;
  const titles = [task.name];
  for (let s = task.suite; s && s !== task.file && !s.filepath; s = s.suite) {
    // vitest 1 hangs top-level tests on a nameless default suite that its reports leave out
    if (s.name === '' && (!s.suite || s.suite === task.file)) continue;
    titles.unshift(s.name);
  }
  cut(dir, { file: task.file.filepath, titles });
});

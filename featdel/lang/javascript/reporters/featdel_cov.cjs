'use strict';
// Cut V8's coverage at a test boundary: `cut(dir, label)` makes V8 write what ran since the last
// cut (v8.takeCoverage() resets the counters) and keeps it as cut-PID-N.json beside
// cut-PID-N.label.json ({file, titles}: the test it belongs to), or drops it when `label` is
// null (what ran between tests). `dir` is $NODE_V8_COVERAGE. Only the tree's own scripts (not
// node_modules) are kept, and a function that did not run only as its range: a cut stays small.
// Runs inside the test process (the launcher, or a vitest worker); standard library only.

const fs = require('fs');
const path = require('path');
const v8 = require('v8');

let count = 0;

// A function that did not run keeps only its own range: what ran inside it is nothing.
function compact(f) {
  return f.ranges.length && f.ranges[0].count === 0 ? { functionName: f.functionName, ranges: [f.ranges[0]] } : f;
}

function prune(file, root) {
  const data = JSON.parse(fs.readFileSync(file, 'utf8'));
  const prefix = 'file://' + root + '/';
  data.result = (data.result || [])
    .filter((s) => s.url.startsWith(prefix) && !s.url.includes('/node_modules/'))
    .map((s) => ({ url: s.url, functions: s.functions.map(compact) }));
  delete data['source-map-cache'];
  return data;
}

module.exports = function cut(dir, label) {
  v8.takeCoverage();
  const mine = fs.readdirSync(dir).filter((f) => f.startsWith(`coverage-${process.pid}-`));
  for (const name of mine) {
    const file = path.join(dir, name);
    if (label) {
      const base = path.join(dir, `cut-${process.pid}-${count}`);
      fs.writeFileSync(`${base}.json`, JSON.stringify(prune(file, process.cwd())));
      fs.writeFileSync(`${base}.label.json`, JSON.stringify(label));
      count += 1;
    }
    fs.unlinkSync(file);
  }
};

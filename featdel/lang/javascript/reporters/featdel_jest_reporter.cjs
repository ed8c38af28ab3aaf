'use strict';
// featdel's jest reporter: each file's results into the launcher's collector (handed over once,
// by `bind`, before jest starts; a second `bind` changes nothing). Test statuses map to passed,
// failed and skipped (pending, todo, disabled); a suite that failed to run is a load error.

let report = null;
let coverage = null;

class FeatdelJestReporter {
  onTestFileStart() {
    coverage.start();
  }

  onTestFileResult(test, result) {
    this.onTestResult(test, result);
  }

  onTestResult(test, result) {
    if (result.featdelSeen) return; // jest 30 calls both hooks
    result.featdelSeen = true;
    const file = result.testFilePath || (test && test.path);
    coverage.end(file, []);
    if (result.testExecError || (result.failureMessage && !(result.testResults || []).length)) {
      const err = result.testExecError || {};
      report.error(file, err.stack || err.message || result.failureMessage || 'the suite failed to run');
      return;
    }
    for (const t of result.testResults || []) {
      const outcome = t.status === 'passed' ? 'passed' : t.status === 'failed' ? 'failed' : 'skipped';
      report.test(file, [...(t.ancestorTitles || []), t.title], outcome, (t.duration || 0) / 1000,
        (t.failureMessages || [])[0]);
    }
  }

  getLastError() {
    return undefined; // the exit status is the launcher's, from the outcomes
  }
}

module.exports = FeatdelJestReporter;
module.exports.bind = function bind(collector, hooks) {
  if (report === null) {
    report = collector;
    coverage = hooks;
  }
};

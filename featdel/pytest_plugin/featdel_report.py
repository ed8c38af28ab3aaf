"""A pytest plugin featdel loads into a repository's test run (by `featdel_launch.py`).

It writes one JSON report to the path given to `configure()` (outside the repository tree): the
outcome and duration of every test by node id, collection errors, and the collected ids. When
coverage.py is measuring, it switches the coverage context to the running test's node id, so
coverage data says which test executed which line. featdel never parses printed output.
This file runs inside the sandbox with the repository's interpreter: standard library and
pytest only.
"""

import json
import os

import pytest

# Bound at import, before any code under test runs, so a later monkeypatch of `json.dump` or
# `os.open` in the test process does not change how the report is written.
_dumps, _open, _write, _close = json.dumps, os.open, os.write, os.close
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_target = {"path": os.environ.get("FEATDEL_REPORT", "")}


def configure(path: str) -> None:
    """Where the report goes; the launcher calls this after taking it out of the environment."""
    _target["path"] = path

_RANK = {"passed": 0, "xpassed": 1, "skipped": 2, "xfailed": 2, "failed": 3, "error": 4}
_tests: dict = {}
_collect_errors: list = []
_collected: list = []


def _coverage():
    try:
        import coverage
    except ImportError:
        return None
    return coverage.Coverage.current()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    cov = _coverage()
    if cov is not None:
        cov.switch_context(item.nodeid)
    yield
    if cov is not None:
        cov.switch_context("")


def _outcome(report) -> str:
    if report.when == "call":
        if hasattr(report, "wasxfail"):
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome
    if report.failed:
        return "error"
    return "skipped" if report.skipped else "passed"


def pytest_runtest_logreport(report):
    entry = _tests.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0})
    entry["duration"] += report.duration
    outcome = _outcome(report)
    if _RANK[outcome] > _RANK[entry["outcome"]]:
        entry["outcome"] = outcome


def pytest_collectreport(report):
    if report.failed:
        _collect_errors.append({"nodeid": report.nodeid, "message": str(report.longrepr)[-2000:]})


def pytest_collection_finish(session):
    _collected.extend(item.nodeid for item in session.items)


def pytest_sessionfinish(session, exitstatus):
    path, _target["path"] = _target["path"], ""  # written once: a second session writes nothing
    if not path:
        return
    payload = _dumps({
        "exitstatus": int(exitstatus),
        "tests": _tests,
        "collected": _collected,
        "collect_errors": _collect_errors,
    }).encode()
    # O_EXCL: a file someone planted under that name makes the write fail (no report), never merge.
    fd = _open(path, _FLAGS, 0o600)
    try:
        while payload:
            payload = payload[_write(fd, payload):]
    finally:
        _close(fd)

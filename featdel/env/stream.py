"""The host's end of a test run's outcome channel: a FIFO in the sealed directory, read while
the run goes, and the check that turns what came through it into a report or a reason.

In: the sealed directory of one run (see featdel.env.testrun). Out: the spec path to hand to the
launcher (`FEATDEL_SPEC`), and after the run a `Stream`: the records, the tripwires the test
process reported, and `problem` when the stream is not one the plugin wrote in full.

Why a FIFO the host reads: a regular file can be truncated and rewritten by code that learns its
name or finds its descriptor; what went into a pipe the host drains is already out of the
sandbox. Each record is numbered and signed with a key the launcher read from a spec file it
unlinked before any tree code ran, so raw writes to the descriptor are forgeries, and a record
after `end`, a test reported twice or one never collected voids the stream (the plugin never
writes those). See docs/grading.md for what a program inside the process can still do.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import select
import threading
from dataclasses import dataclass, field
from pathlib import Path

MAX_STREAM_BYTES = 256 << 20
KINDS = frozenset({"start", "collected", "test", "trip", "end"})


@dataclass(frozen=True, kw_only=True, slots=True)
class Stream:
    start: dict | None = None
    collected: list[str] = field(default_factory=list)
    found: list[str] | None = None  # with `run_only`: every test collected, the deselected too
    collect_errors: list[dict] = field(default_factory=list)
    tests: dict[str, dict] = field(default_factory=dict)  # node id -> {"outcome", "duration"}
    trips: list[str] = field(default_factory=list)  # tampering the run itself saw
    exitstatus: int | None = None
    problem: str | None = None  # why the stream is not a complete one from the plugin


class FifoReader:
    """A FIFO in `folder` (the run's sealed directory) that the sandbox writes and only the host
    reads, drained by a thread while the run goes (use as a context manager around the run): the
    first `cap` bytes are kept (`data()`), the rest read and dropped, so a writer never blocks.

    The host holds a write end of its own, so the FIFO never reads as ended between the
    sandbox's writers: the thread sleeps in `select` until there is data, and the end of the run
    wakes it through a pipe at once (a reader that polled for the end cost every run tens of
    milliseconds of waiting)."""

    def __init__(self, folder: Path, prefix: str, cap: int) -> None:
        self.path = folder / f"{prefix}-{secrets.token_hex(16)}"
        os.mkfifo(self.path, 0o622)
        os.chmod(self.path, 0o622)  # the sandbox uid writes; nobody but the host reads
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._held = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)  # never inherited (close-on-exec)
        self._wake_r, self._wake_w = os.pipe()
        self._cap, self._size, self._chunks = cap, 0, []
        self._reader = threading.Thread(target=self._drain, daemon=True)

    def __enter__(self) -> FifoReader:
        self._reader.start()
        return self

    def __exit__(self, *exc: object) -> None:
        os.write(self._wake_w, b"x")
        self._reader.join()
        for fd in (self._fd, self._held, self._wake_r, self._wake_w):
            os.close(fd)
        self.path.unlink(missing_ok=True)

    def _drain(self) -> None:
        while True:
            ready, _, _ = select.select([self._fd, self._wake_r], [], [])
            self._read_waiting()  # after the run ended, once more: nothing is left behind
            if self._wake_r in ready:
                return

    def _read_waiting(self) -> None:
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:
                return  # empty (the host's own write end keeps it from reading as ended)
            if not chunk:
                return
            if self._size < self._cap:
                self._chunks.append(chunk[: self._cap - self._size])
                self._size += len(self._chunks[-1])

    def data(self) -> bytes:
        return b"".join(self._chunks)


class Channel:
    """One run's channel: `spec` is the file the launcher reads; use as a context manager around
    the run, then `stream()`."""

    def __init__(self, sealed: Path, *, added: dict[str, list[int]] | None = None, config: str | None = None,
                 watch: list[str] | None = None, run_only: list[str] | None = None):
        self.key = secrets.token_bytes(32)
        self._reader = FifoReader(sealed, "channel", MAX_STREAM_BYTES)
        self.fifo = self._reader.path
        self.spec = sealed / f"spec-{secrets.token_hex(16)}.json"
        spec = {"channel": str(self.fifo), "key": self.key.hex(), "added": added or {}, "config": config,
                "watch": watch or [], **({} if run_only is None else {"run_only": run_only})}
        self.spec.write_text(json.dumps(spec))
        os.chmod(self.spec, 0o644)

    def __enter__(self) -> Channel:
        self._reader.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._reader.__exit__(*exc)
        self.spec.unlink(missing_ok=True)

    def stream(self, *, ran: bool = True) -> Stream:
        return parse(self._reader.data(), self.key, ran=ran)


def parse(data: bytes, key: bytes, *, ran: bool = True) -> Stream:
    """Check and read a stream (see the module docstring); never raises on what the sandbox wrote.
    `ran`: the run was to run its tests (not `--collect-only`), so each needs an outcome."""
    mac0 = hmac.new(key, digestmod=hashlib.sha256)
    got: dict = {"start": None, "collected": [], "found": None, "collect_errors": [], "tests": {}, "trips": [],
                 "exitstatus": None}
    problem = None
    ended = False
    if len(data) >= MAX_STREAM_BYTES:
        return Stream(problem=f"the stream is over {MAX_STREAM_BYTES >> 20} MiB")
    lines = data.split(b"\n")
    for seq, raw in enumerate(lines[:-1] if data.endswith(b"\n") or not data else lines):
        record, why = _record(raw, seq, mac0)
        if why is None and ended:
            why = "a record after the end of the run"
        if why is None:
            why = _take(record, got)
            ended = ended or record["kind"] == "end"
        if why is not None:
            got["trips"].append(f"stream: {why}")
            problem = problem or why
            break
    if problem is None and got["start"] is None:
        problem = "the run wrote nothing" if not data else "no start record"
    elif problem is None and not ended:
        problem = "the run stopped before its end record"
    elif problem is None and ran and got["exitstatus"] in (0, 1) and len(got["tests"]) != len(got["collected"]):
        # a run that was not interrupted (exit 2) ran every collected test
        missing = sorted(set(got["collected"]) - set(got["tests"]))
        problem = f"{len(missing)} collected tests have no outcome, e.g. {missing[0]}"
    trips = got.pop("trips")
    got.pop("known", None)
    return Stream(**got, trips=trips, problem=problem)


def _record(raw: bytes, seq: int, mac0) -> tuple[dict | None, str | None]:
    parts = raw.split(b" ", 2)
    if len(parts) != 3 or parts[0] != str(seq).encode():
        return None, f"record {seq} is not numbered {seq}"
    mac = mac0.copy()
    mac.update(str(seq).encode() + b"\n" + parts[2])
    if not hmac.compare_digest(mac.hexdigest().encode(), parts[1]):
        return None, f"record {seq} is not signed by the plugin (a forged record)"
    try:
        record = json.loads(parts[2])
    except ValueError:
        return None, f"record {seq} is not JSON"
    if not isinstance(record, dict) or record.get("kind") not in KINDS:
        return None, f"record {seq} has no known kind"
    return record, None


def _take(record: dict, got: dict) -> str | None:
    """Fold one signed record into `got`; why it is out of place, if it is."""
    kind = record["kind"]
    if kind == "start":
        if got["start"] is not None:
            return "a second start record"
        got["start"] = record
    elif got["start"] is None:
        return f"a {kind} record before the start record"
    elif kind == "collected":
        ids = record.get("ids")
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            return "a malformed collected record"
        found = record.get("found")
        if found is not None and (not isinstance(found, list) or not all(isinstance(i, str) for i in found)):
            return "a malformed collected record"
        got["collected"], got["known"], got["found"] = ids, set(ids), found
        got["collect_errors"] = [e for e in record.get("errors") or [] if isinstance(e, dict)]
    elif kind == "test":
        node, outcome = record.get("id"), record.get("outcome")
        if not isinstance(node, str) or not isinstance(outcome, str):
            return "a malformed test record"
        if node in got["tests"]:
            return f"{node} reported twice"
        if node not in got.get("known", ()):
            return f"{node} reported but never collected"
        duration = record.get("duration")
        got["tests"][node] = {"outcome": outcome, "duration": float(duration) if isinstance(duration, (int, float)) else 0.0}
    elif kind == "trip":
        where = f" at {record['where']}" if record.get("where") else ""
        got["trips"].append(f"{record.get('rule', '?')}: {record.get('event', '')} {record.get('what', '')}".strip()
                            .replace(":  ", ": ") + where)
    elif kind == "end":
        status = record.get("exitstatus")
        if not isinstance(status, int):
            return "a malformed end record"
        got["exitstatus"] = status
    return None

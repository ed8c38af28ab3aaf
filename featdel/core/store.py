"""Graded attempts in an embedded DuckDB file, one row per attempt.

In: `GradeResult`s (from `featdel evaluate`'s RESULTS.jsonl) or rows the trainer makes. Out: the
`attempts` table of RUN_DIR/curriculum.duckdb. DuckDB lets one process hold a file open for
writing, so every call opens the file, does its work in one transaction and closes it; a process
that finds the lock taken waits and retries (with jitter) until `lock_timeout_s`, so several
processes recording at once lose nothing. Each attempt has a key (`attempt_id`): recording the
same results file twice adds nothing.

`broken` attempts are stored (they say the infrastructure failed) but never count as failures:
`outcomes` leaves them out.

Beside them, the `flags` table holds what `featdel monitor` found in the learner's trajectories
(`add_flags`, `flags`): one row per rule and turn, keyed so monitoring a file twice adds nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import random
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from featdel.core.errors import FeatdelError

SCHEMA = """
create table if not exists attempts (
    attempt_id varchar primary key,
    instance_id varchar not null,
    learner varchar not null,
    round integer not null,
    reward double not null,
    status varchar not null,
    seconds double,
    model varchar,
    recorded_at timestamptz not null
)
"""
COLUMNS = ("attempt_id", "instance_id", "learner", "round", "reward", "status", "seconds", "model", "recorded_at")


class StoreError(FeatdelError):
    """The attempts file cannot be opened or read."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Attempt:
    instance_id: str
    learner: str
    reward: float
    status: str  # a GradeStatus value: resolved, unresolved, patch_failed, suspect, broken
    round: int = 0
    seconds: float = 0.0
    model: str = ""
    attempt_id: str = ""  # derived from the content when empty
    recorded_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def key(self) -> str:
        if self.attempt_id:
            return self.attempt_id
        text = json.dumps([self.instance_id, self.learner, self.round, self.reward, self.status, self.seconds,
                           self.model])
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def default_path(run_dir: Path) -> Path:
    return Path(run_dir) / "curriculum.duckdb"


@contextmanager
def connect(path: Path, *, read_only: bool = False, lock_timeout_s: float = 120.0) -> Iterator:
    """A connection to `path`, waiting while another process holds its lock."""
    import duckdb

    path = Path(path)
    if read_only and not path.exists():
        raise StoreError(f"{path} does not exist: record attempts first (`featdel curriculum record`)")
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + lock_timeout_s
    # A sidecar lock taken before DuckDB opens the file: two processes creating the database at
    # once would otherwise see a half-written file ("not a valid DuckDB database file").
    with _file_lock(path.with_name(path.name + ".lock"), shared=read_only, deadline=deadline):
        delay = 0.01
        while True:
            try:
                con = duckdb.connect(str(path), read_only=read_only)
                break
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                    raise StoreError(f"{path}: {str(exc).splitlines()[0]}") from None
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 1.6, 0.25)
        try:
            if not read_only:
                con.execute(SCHEMA)
            yield con
        finally:
            con.close()


@contextmanager
def _file_lock(lock_path: Path, *, shared: bool, deadline: float) -> Iterator[None]:
    """flock on `lock_path` (shared for readers, exclusive for writers), waiting until `deadline`."""
    import fcntl

    with open(lock_path, "a") as fh:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(fh, mode)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise StoreError(f"{lock_path}: another process held the lock too long") from None
                time.sleep(0.02 + 0.03 * random.random())
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def add(path: Path, attempts: Iterable[Attempt], *, lock_timeout_s: float = 120.0) -> int:
    """Insert attempts (one transaction); return how many were new."""
    rows = [(a.key(), a.instance_id, a.learner, a.round, float(a.reward), str(a.status), a.seconds, a.model,
             a.recorded_at) for a in attempts]
    if not rows:
        return 0
    with connect(path, lock_timeout_s=lock_timeout_s) as con:
        before = con.execute("select count(*) from attempts").fetchone()[0]
        con.execute("begin")
        one = f"({', '.join('?' * len(COLUMNS))})"
        for i in range(0, len(rows), 500):  # one statement per 500 rows: executemany is slow in DuckDB
            chunk = rows[i : i + 500]
            con.execute(f"insert or ignore into attempts ({', '.join(COLUMNS)}) values {', '.join([one] * len(chunk))}",
                        [v for row in chunk for v in row])
        con.execute("commit")
        return con.execute("select count(*) from attempts").fetchone()[0] - before


def from_results(results: Path, learner: str, *, round: int = 0) -> list[Attempt]:
    """Attempts from `featdel evaluate`'s RESULTS.jsonl; the key is the learner and the line's
    content (which holds the grading's seconds), so a results file recorded twice adds nothing."""
    if not Path(results).is_file():
        raise StoreError(f"{results} is not a file: give the RESULTS.jsonl that `featdel evaluate` wrote")
    out = []
    for number, line in enumerate(Path(results).read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            iid, status, reward = row["instance_id"], row["status"], float(row["reward"])
        except (ValueError, KeyError, TypeError):
            raise StoreError(f"{results}:{number} is not a grade result (instance_id, status, reward)") from None
        key = hashlib.sha256(f"{learner}\0{line.strip()}".encode()).hexdigest()[:24]
        out.append(Attempt(instance_id=iid, learner=learner, round=round, reward=reward, status=status,
                           seconds=float(row.get("seconds") or 0.0), model=row.get("model_name_or_path") or "",
                           attempt_id=key))
    return out


def attempts(path: Path, *, learner: str | None = None) -> list[Attempt]:
    """Every stored attempt (of one learner), oldest first."""
    with connect(path, read_only=True) as con:
        where, args = ("where learner = ?", [learner]) if learner else ("", [])
        rows = con.execute(f"select {', '.join(COLUMNS)} from attempts {where} order by recorded_at, attempt_id",
                           args).fetchall()
    return [Attempt(**dict(zip(COLUMNS, r, strict=True))) for r in rows]


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """What one task's attempts say: `successes` (sum of rewards) out of `trials`, broken left out."""

    instance_id: str
    successes: float
    trials: int
    broken: int = 0
    last_round: int = 0


def outcomes(path: Path, *, learner: str | None = None, rounds: tuple[int, int] | None = None) -> dict[str, Outcome]:
    """Per task, graded attempts (of one learner, in an inclusive round range). Broken attempts
    are counted apart and are never failures."""
    where, args = ["true"], []
    if learner:
        where.append("learner = ?")
        args.append(learner)
    if rounds:
        where.append("round between ? and ?")
        args += list(rounds)
    with connect(path, read_only=True) as con:
        rows = con.execute(
            "select instance_id, coalesce(sum(reward) filter (where status <> 'broken'), 0), "
            "count(*) filter (where status <> 'broken'), count(*) filter (where status = 'broken'), max(round) "
            f"from attempts where {' and '.join(where)} group by instance_id order by instance_id", args).fetchall()
    return {r[0]: Outcome(instance_id=r[0], successes=float(r[1]), trials=int(r[2]), broken=int(r[3]),
                          last_round=int(r[4])) for r in rows}


def last_round(path: Path, learner: str) -> int | None:
    if not Path(path).exists():
        return None
    with connect(path, read_only=True) as con:
        return con.execute("select max(round) from attempts where learner = ?", [learner]).fetchone()[0]


def by_round(path: Path, *, learner: str | None = None) -> list[tuple[str, int, float, int]]:
    """(instance_id, round, successes, trials) per task and round, broken left out."""
    where, args = ("and learner = ?", [learner]) if learner else ("", [])
    with connect(path, read_only=True) as con:
        return con.execute("select instance_id, round, sum(reward), count(*) from attempts "
                           f"where status <> 'broken' {where} group by instance_id, round "
                           "order by instance_id, round", args).fetchall()


# Monitor flags (featdel.monitor) live beside the attempts: one row per rule and turn of a trajectory.
FLAGS_SCHEMA = """
create table if not exists flags (
    flag_id varchar primary key,
    trajectory varchar not null,
    instance_id varchar not null,
    rollout integer not null,
    rule varchar not null,
    turn integer not null,
    evidence varchar not null,
    learner varchar,
    recorded_at timestamptz not null
)
"""
FLAG_COLUMNS = ("flag_id", "trajectory", "instance_id", "rollout", "rule", "turn", "evidence", "learner",
                "recorded_at")


@dataclass(frozen=True, kw_only=True, slots=True)
class StoredFlag:
    trajectory: str  # the trajectory's key (featdel.monitor.report.trajectory_key)
    instance_id: str
    rollout: int
    rule: str
    turn: int
    evidence: str
    learner: str = ""
    recorded_at: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC))

    def key(self) -> str:
        text = json.dumps([self.trajectory, self.rule, self.turn, self.evidence, self.learner])
        return hashlib.sha256(text.encode()).hexdigest()[:24]


def add_flags(path: Path, flags: Iterable[StoredFlag], *, lock_timeout_s: float = 120.0) -> int:
    """Insert monitor flags (one transaction; the same flag twice is one row); return how many were new."""
    rows = [(f.key(), f.trajectory, f.instance_id, f.rollout, f.rule, f.turn, f.evidence, f.learner, f.recorded_at)
            for f in flags]
    with connect(path, lock_timeout_s=lock_timeout_s) as con:
        con.execute(FLAGS_SCHEMA)
        before = con.execute("select count(*) from flags").fetchone()[0]
        if rows:
            con.execute("begin")
            one = f"({', '.join('?' * len(FLAG_COLUMNS))})"
            for i in range(0, len(rows), 500):
                chunk = rows[i : i + 500]
                con.execute(f"insert or ignore into flags ({', '.join(FLAG_COLUMNS)}) values "
                            f"{', '.join([one] * len(chunk))}", [v for row in chunk for v in row])
            con.execute("commit")
        return con.execute("select count(*) from flags").fetchone()[0] - before


def flags(path: Path, *, learner: str | None = None) -> list[StoredFlag]:
    """Every stored flag (of one learner), by task, rollout and turn; none when nothing was monitored."""
    with connect(path, read_only=True) as con:
        if not con.execute("select count(*) from information_schema.tables where table_name = 'flags'").fetchone()[0]:
            return []
        where, args = ("where learner = ?", [learner]) if learner else ("", [])
        rows = con.execute(f"select {', '.join(FLAG_COLUMNS[1:])} from flags {where} "
                           "order by instance_id, rollout, turn, rule", args).fetchall()
    return [StoredFlag(**dict(zip(FLAG_COLUMNS[1:], r, strict=True))) for r in rows]


def record_results(path: Path, results: Path, learner: str, *, round: int | None = None) -> tuple[list[Attempt], int, int]:
    """`featdel evaluate`'s results as the learner's attempts in round `round` (default: its
    last + 1); returns (the attempts, how many were new, the round)."""
    if round is None:
        last = last_round(path, learner)
        round = 0 if last is None else last + 1
    attempts = from_results(results, learner, round=round)
    return attempts, add(path, attempts), round

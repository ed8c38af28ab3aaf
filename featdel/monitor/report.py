"""`featdel monitor`'s library side: trajectory files in, flags stored and summarised.

In: trajectory JSON Lines (`featdel solve`'s, the trainer's: `featdel.agent.trajectory`), an
optional judge (`judge.Judge`) and an optional curriculum database. Out: a `MonitorReport`:
every flag, the trajectories per task, the judge's errors and the lines that were not
trajectories (one bad line is a recorded problem, never the end of the file); with a database,
the flags in its `flags` table beside the attempts (`featdel.core.store.add_flags`), keyed
so that monitoring a file twice adds nothing. `print_report` shows flags per rule and per task.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from featdel.agent.trajectory import Trajectory
from featdel.core.errors import FeatdelError
from featdel.monitor.rules import Flag, flag


@dataclass(frozen=True, kw_only=True, slots=True)
class MonitorReport:
    trajectories: dict[str, int]  # instance id -> trajectories read
    flags: list[Flag]
    keys: list[str] = field(default_factory=list)  # the flagged trajectory's key, one per flag
    judge_errors: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    stored: int = 0  # flags new to the database

    def by_rule(self) -> dict[str, dict[str, int]]:
        """Per rule: flags, trajectories and tasks it flagged."""
        out: dict[str, dict[str, int]] = {}
        for rule in sorted({f.rule for f in self.flags}):
            hits = [(k, f) for k, f in zip(self.keys, self.flags, strict=True) if f.rule == rule]
            out[rule] = {"flags": len(hits), "trajectories": len({k for k, _ in hits}),
                         "tasks": len({f.instance_id for _, f in hits})}
        return out

    def by_task(self) -> dict[str, dict]:
        """Per task: trajectories read, trajectories flagged, and flags per rule."""
        out = {}
        for iid, total in sorted(self.trajectories.items()):
            hits = [(k, f) for k, f in zip(self.keys, self.flags, strict=True) if f.instance_id == iid]
            out[iid] = {"trajectories": total, "flagged": len({k for k, _ in hits}),
                        "rules": dict(sorted(Counter(f.rule for _, f in hits).items()))}
        return out

    def to_json(self) -> dict:
        return {"trajectories": sum(self.trajectories.values()),
                "flags": [asdict(f) | {"trajectory": k} for k, f in zip(self.keys, self.flags, strict=True)],
                "by_rule": self.by_rule(), "by_task": self.by_task(), "judge_errors": self.judge_errors,
                "unreadable": self.unreadable, "stored": self.stored}


def trajectory_key(traj: Trajectory) -> str:
    """A trajectory's identity: its task, rollout, seed and what the learner did."""
    text = json.dumps([traj.instance_id, traj.rollout, traj.seed, traj.patch, [t.action_text for t in traj.turns]])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def read(path: Path) -> tuple[list[Trajectory], list[str]]:
    """The trajectories in a JSON Lines file, and a reason for every line that is not one."""
    if not Path(path).is_file():
        raise FeatdelError(f"{path} is not a file: give the trajectories JSONL that `featdel solve` or the trainer wrote")
    trajs, bad = [], []
    for number, line in enumerate(Path(path).read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            trajs.append(Trajectory.from_dict(json.loads(line)))
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            bad.append(f"{path}:{number}: not a trajectory ({type(exc).__name__}: {str(exc)[:80]})")
    return trajs, bad


def monitor(paths: list[Path], *, judge=None, db: Path | None = None, learner: str = "",
            on_step: Callable[[str, str], None] = lambda item, step: None) -> MonitorReport:
    """Rules (then the judge, when given) over every trajectory in `paths`; flags stored in `db`."""
    counts: Counter[str] = Counter()
    flags: list[Flag] = []
    keys: list[str] = []
    errors: list[str] = []
    unreadable: list[str] = []
    for path in paths:
        trajs, bad = read(path)
        unreadable += bad
        for traj in trajs:
            item = f"{traj.instance_id}#{traj.rollout}"
            on_step(item, "rules")
            counts[traj.instance_id] += 1
            found = flag(traj)
            if judge is not None:
                on_step(item, "judge")
                judged, error = judge.judge(traj)
                found += judged
                errors += [error] if error else []
            flags += found
            keys += [trajectory_key(traj)] * len(found)
            on_step(item, "done")
    stored = 0
    if db is not None:
        from featdel.core.store import StoredFlag, add_flags

        stored = add_flags(db, [StoredFlag(trajectory=k, instance_id=f.instance_id, rollout=f.rollout, rule=f.rule,
                                           turn=f.turn, evidence=f.evidence, learner=learner)
                                for k, f in zip(keys, flags, strict=True)])
    return MonitorReport(trajectories=dict(counts), flags=flags, keys=keys, judge_errors=errors,
                         unreadable=unreadable, stored=stored)


def print_report(report: MonitorReport) -> None:
    from rich.console import Console
    from rich.table import Table

    out = Console(width=None if sys.stdout.isatty() else 160)
    total = sum(report.trajectories.values())
    flagged = len(set(report.keys))
    rules = Table(title=f"flags per rule ({flagged} of {total} trajectories flagged)")
    for col in ("rule", "flags", "trajectories", "tasks", "example"):
        rules.add_column(col, overflow="fold")
    for rule, row in report.by_rule().items():
        example = next(f for f in report.flags if f.rule == rule)
        rules.add_row(rule, str(row["flags"]), str(row["trajectories"]), str(row["tasks"]),
                      f"{example.instance_id}#{example.rollout} turn {example.turn}: {example.evidence[:90]}")
    out.print(rules)
    tasks = Table(title="flags per task")
    for col in ("instance_id", "trajectories", "flagged", "rules"):
        tasks.add_column(col, overflow="fold")
    for iid, row in report.by_task().items():
        tasks.add_row(iid, str(row["trajectories"]), str(row["flagged"]),
                      ", ".join(f"{r} {n}" for r, n in row["rules"].items()) or "-")
    out.print(tasks)
    for line in report.unreadable + report.judge_errors:
        out.print(f"[yellow]{line}[/]")

"""Progress bars and summary tables (rich) for the CLI's long commands."""

from __future__ import annotations

import sys
import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console(stderr=True)


class StepProgress:
    """One bar over items; the line below it names what each item is doing now."""

    def __init__(self, what: str, items: list[str]):
        self._items = items
        self._progress = Progress(
            TextColumn(f"[bold]{what}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            TextColumn("{task.fields[now]}"), console=console, transient=False,
        )
        self._task = None
        self._now: dict[str, str] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> StepProgress:
        self._progress.start()
        self._task = self._progress.add_task("", total=len(self._items), now="")
        return self

    def __exit__(self, *exc) -> None:
        self._progress.stop()

    def step(self, item: str, step: str) -> None:
        with self._lock:
            if step in ("done", "resumed"):
                self._now.pop(item, None)
                self._progress.advance(self._task)
            else:
                self._now[item] = step
            now = ", ".join(f"{k.split(':')[-1]}: {v}" for k, v in list(self._now.items())[-2:])
            self._progress.update(self._task, now=now)


def repo_table(records) -> None:
    table = Table(title="mined repositories")
    for col in ("repo", "status", "tests", "passed", "failed", "flaky", "suite s", "cover %", "reason"):
        table.add_column(col, overflow="fold")
    for r in records:
        colour = {"mined": "green", "rejected": "yellow", "broken": "red"}[r.status]
        table.add_row(
            r.name, f"[{colour}]{r.status}[/]", str(r.collected), str(r.passed), str(r.failed),
            str(r.flaky), f"{r.suite_seconds:.1f}", f"{r.coverage:.1f}", r.reason,
        )
    Console(width=None if sys.stdout.isatty() else 160).print(table)

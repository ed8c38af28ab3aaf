"""A progress bar over a stage's items (rich, on stderr), for the long commands."""

from __future__ import annotations

import threading

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

console = Console(stderr=True)


class StepProgress:
    """One bar over items; the line below it names what each item is doing now."""

    def __init__(self, what: str, items: list[str]):
        self._items = items
        self._known = set(items)
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
        if item not in self._known:  # a stage reports every item it skips; this bar counts its own
            return
        with self._lock:
            if step in ("done", "resumed"):
                self._now.pop(item, None)
                self._progress.advance(self._task)
            else:
                self._now[item] = step
            now = ", ".join(f"{k.split(':')[-1]}: {v}" for k, v in list(self._now.items())[-2:])
            self._progress.update(self._task, now=now)

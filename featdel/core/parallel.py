"""Threads over items: results in the order they finish.

In: a function, items and how many threads. Out: `fn(item)` per item as each finishes. An
interrupt (Ctrl-C, a consumer that stops reading) drops the items not started yet and waits for
those running, so a stage that writes each result as it comes stays resumable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")


def thread_map(fn: Callable[[T], R], items: Iterable[T], jobs: int = 1) -> Iterator[R]:
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        for future in as_completed([pool.submit(fn, item) for item in items]):
            yield future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)

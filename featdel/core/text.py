"""Words for counts in what featdel prints and writes ("1 task", "3 tasks")."""

from __future__ import annotations

_IRREGULAR = {"repository": "repositories", "environment": "environments"}


def counted(n: int, noun: str) -> str:
    """`n` and `noun`, plural unless n is 1: counted(1, "task") == "1 task"."""
    return f"{n} {noun if n == 1 else _IRREGULAR.get(noun, noun + 's')}"

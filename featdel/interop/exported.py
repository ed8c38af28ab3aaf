"""What an export wrote, and how it writes: whole files or nothing, the same bytes each time."""

from __future__ import annotations

import dataclasses
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class Exported:
    """`written` tasks (rows or folders); `left_out`: {instance_id: why the format cannot hold it};
    `notes`: what the user should know about what was written (an image left unpinned)."""

    written: int
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)


def write_atomic(path: Path, data: bytes) -> Path:
    """`data` at `path`, replacing it whole (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    return path

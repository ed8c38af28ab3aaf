"""What crosses between the driver and a worker: a mining result with the files it wrote, a
repository's run-directory files for verification, and the sandbox backend's name.

In: a run directory and a repository name, or a worker's files. Out: bytes keyed by relative
path, or a node-local run directory holding them (`unpacked`). Only the driver writes the run
directory itself (`write_files`), each file atomically and never outside it.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from featdel.core.errors import FeatdelError
from featdel.core.records import RepoRecord
from featdel.core.rundir import RunDir


@dataclass(frozen=True, kw_only=True, slots=True)
class Mined:
    """One mining result: the record, and the run-directory files the driver must write
    (relative paths; empty when the work ran in the driver and wrote them itself)."""

    record: RepoRecord
    files: dict[str, bytes] = field(default_factory=dict)
    scratch: str = ""  # the worker's scratch run directory, named in the record's reason


def sandbox_spec(backend) -> tuple[str, bool]:
    """(backend name, unsafe) from which a worker rebuilds the driver's sandbox backend."""
    name = getattr(backend, "name", "local")
    return ("local", True) if name == "unsafe" else (name, False)


def repo_files(run_dir: Path, name: str) -> dict[str, bytes]:
    """The run-directory files a worker needs to verify `name`'s deletions (relative paths)."""
    rd = RunDir(run_dir)
    paths = (rd.snapshot(name), rd.baseline(name), rd.coverage(name))
    return {p.relative_to(run_dir).as_posix(): p.read_bytes() for p in paths}


def files_digest(files: dict[str, bytes]) -> str:
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    return h.hexdigest()[:24]


def write_files(run_dir: Path, files: dict[str, bytes]) -> None:
    """Write files a worker returned under `run_dir` (each atomically; never outside it)."""
    root = run_dir.resolve()
    for rel, data in sorted(files.items()):
        path = (root / rel).resolve()
        if not path.is_relative_to(root) or path == root:
            raise FeatdelError(f"a worker returned a file outside the run directory: {rel!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(path)


def unpacked(files: dict[str, bytes]) -> Path:
    """A node-local run directory holding `files`, unpacked once per content (a worker's copy
    of what verification reads; never the driver's run directory)."""
    from featdel.env.sources import cache_root

    root = cache_root() / "ray-runs" / files_digest(files)
    if (root / ".complete").exists():
        return root
    import shutil
    import tempfile

    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=root.parent))
    write_files(tmp, files)
    (tmp / ".complete").write_text("")
    try:
        tmp.rename(root)
    except OSError:  # another worker on this node unpacked it first
        shutil.rmtree(tmp, ignore_errors=True)
    return root

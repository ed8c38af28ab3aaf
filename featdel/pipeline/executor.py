"""Where mining and verification run: threads in this process (`local`, the default) or tasks
on a Ray cluster (`ray`, the optional extra `pip install 'featdel[ray]'`).

In: the items a stage has left (corpus entries to mine, deletions to verify) and what each
needs. Out: their results in the order they finish (`Mined`, `Verdict`), for the stage to
write. Only the driver (the process that called the stage) writes the run directory, so a
run stays resumable and nothing is written twice:
- a Ray mining task mines into a scratch run directory on its node and returns the
  `RepoRecord` with the files it wrote (baseline, coverage, snapshot) as bytes;
- a Ray verification task gets pure inputs (the record, the deletion, the options, the sandbox
  backend's name) and the repository's run-directory files as one shared object, which the
  node unpacks once into its cache (`cache_root()/ray-runs/<digest>`), and returns a `Verdict`.
A task whose worker dies is retried by Ray (`max_retries`); an exception inside verification
is already a verdict, so none is retried. A candidate whose worker dies on every try becomes a
`broken` verdict naming that. Verification is pinned (node affinity) to a node that already
holds the repository's environment (and, with docker, its image): every node is asked once per
run which it has; a repository no node has goes anywhere and comes back `broken`, as locally.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from featdel.core.errors import FeatdelError
from featdel.core.records import Deletion, RepoRecord, Verdict

# Test hook: "DELETION_ID=MARKER" makes the first try of that candidate kill its Ray worker
# (os._exit) after writing its pid to MARKER, to show the retry (tests/test_executor_ray.py).
DIE_ONCE_VAR = "FEATDEL_RAY_DIE_ONCE"


@dataclass(frozen=True, kw_only=True, slots=True)
class Mined:
    """One mining result: the record, and the run-directory files the driver must write
    (relative paths; empty when the work ran in the driver and wrote them itself)."""

    record: RepoRecord
    files: dict[str, bytes] = field(default_factory=dict)
    scratch: str = ""  # the worker's scratch run directory, named in the record's reason


class Executor(Protocol):
    name: str

    def mine(self, entries: list, run_dir: Path, *, backend, thresholds, on_step) -> Iterator[Mined]: ...

    def verify(self, deletions: list[Deletion], run_dir: Path, records: dict[str, RepoRecord], *, backend, opts,
               on_step) -> Iterator[Verdict]: ...


class LocalExecutor:
    """Today's behaviour: a thread pool of `jobs` in this process."""

    name = "local"

    def __init__(self, jobs: int = 1):
        self.jobs = max(1, jobs)

    def _run(self, fn: Callable, items: list) -> Iterator:
        pool = ThreadPoolExecutor(max_workers=self.jobs)
        try:
            for future in as_completed([pool.submit(fn, item) for item in items]):
                yield future.result()
        finally:  # interrupted: items not started yet are dropped (redone on resume)
            pool.shutdown(wait=True, cancel_futures=True)

    def mine(self, entries, run_dir, *, backend, thresholds, on_step):
        from featdel.pipeline.mine import mine_one

        yield from self._run(lambda e: Mined(record=mine_one(e, run_dir, backend=backend, thresholds=thresholds,
                                                              on_step=on_step)), entries)

    def verify(self, deletions, run_dir, records, *, backend, opts, on_step):
        from featdel.pipeline.verify import verify_in

        contexts: dict = {}

        def work(deletion: Deletion) -> Verdict:
            on_step(deletion.deletion_id, "verifying")
            return verify_in(contexts, run_dir, records, deletion, backend, opts)

        yield from self._run(work, deletions)


def get_executor(name: str = "local", *, address: str | None = None, jobs: int = 1) -> Executor:
    """`local` (threads, `jobs` of them) or `ray` (the cluster at `address`; none: a local
    cluster of `jobs` CPUs, or $RAY_ADDRESS). A one-line error when ray is not installed."""
    if name == "local":
        if address:
            raise FeatdelError("--address needs --executor ray")
        return LocalExecutor(jobs)
    if name == "ray":
        from featdel.pipeline.executor_ray import RayExecutor

        return RayExecutor(address=address, num_cpus=jobs)
    raise FeatdelError(f"unknown executor {name!r}: choose local or ray")


def sandbox_spec(backend) -> tuple[str, bool]:
    """(backend name, unsafe) from which a worker rebuilds the driver's sandbox backend."""
    name = getattr(backend, "name", "local")
    return ("local", True) if name == "unsafe" else (name, False)


def repo_files(run_dir: Path, name: str) -> dict[str, bytes]:
    """The run-directory files a worker needs to verify `name`'s deletions (relative paths)."""
    from featdel.core.rundir import RunDir

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

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

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from featdel.core.errors import FeatdelError
from featdel.core.records import Deletion, RepoRecord, Verdict
from featdel.pipeline.shipping import Mined


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

    def mine(self, entries, run_dir, *, backend, thresholds, on_step):
        from featdel.pipeline.mine import mine_here

        return mine_here(entries, run_dir, backend=backend, thresholds=thresholds, on_step=on_step, jobs=self.jobs)

    def verify(self, deletions, run_dir, records, *, backend, opts, on_step):
        from featdel.pipeline.verify import verify_here

        return verify_here(deletions, run_dir, records, backend=backend, opts=opts, on_step=on_step, jobs=self.jobs)


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

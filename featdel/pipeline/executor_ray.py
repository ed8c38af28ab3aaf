"""The Ray executor (see featdel.pipeline.executor for the contract): mining and verification as Ray
tasks, results streamed back to the driver, which alone writes the run directory.

In: a cluster address (none: a local cluster of `num_cpus`, or $RAY_ADDRESS). Out: `Mined`
and `Verdict` results in completion order. Why this shape:
- tasks are module functions over frozen records, so a worker on any node with featdel
  installed runs them, and a retried task (its worker died) computes the same result;
- at most two tasks per cluster CPU are in flight, so an interrupted run loses little and the
  driver's memory stays flat on large runs; on interruption the pending tasks are cancelled;
- `ray` is imported only here, inside functions (`featdel --help` never imports it).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from featdel.core.errors import FeatdelError
from featdel.core.records import Deletion, RepoRecord, RepoStatus, Verdict, VerdictStatus
from featdel.pipeline.shipping import Mined, repo_files, sandbox_spec, unpacked

_BACKENDS: dict[tuple[str, bool], object] = {}  # per worker process
_CONTEXTS: dict[str, dict] = {}  # per worker process: unpacked run dir -> {repo: RepoContext | reason}
_REMOTES: dict[str, object] = {}


def _backend(spec: tuple[str, bool]):
    if spec not in _BACKENDS:
        from featdel.sandboxes import get_backend

        _BACKENDS[spec] = get_backend(spec[0], unsafe_no_sandbox=spec[1])
    return _BACKENDS[spec]


def verify_task(record: RepoRecord, files: dict[str, bytes], deletion: Deletion, opts, spec: tuple[str, bool]) -> Verdict:
    """One candidate on a worker: its repo's files unpacked on this node, then `verify_in`."""
    from featdel.pipeline.verify import verify_in

    run_dir = unpacked(files)
    if str(run_dir) not in _CONTEXTS and len(_CONTEXTS) >= 8:  # a long run over many repos: keep memory flat
        _CONTEXTS.pop(next(iter(_CONTEXTS)))
    contexts = _CONTEXTS.setdefault(str(run_dir), {})
    return verify_in(contexts, run_dir, {record.name: record}, deletion, _backend(spec), opts)


def mine_task(entry, spec: tuple[str, bool], thresholds) -> Mined:
    """One repository on a worker, mined into a scratch run directory whose files come back."""
    from featdel.pipeline.mine import mine_one

    with tempfile.TemporaryDirectory(prefix="featdel-ray-mine-") as tmp:
        record = mine_one(entry, Path(tmp), backend=_backend(spec), thresholds=thresholds,
                          on_step=lambda source, step: None)
        files = {p.relative_to(tmp).as_posix(): p.read_bytes() for p in sorted(Path(tmp).rglob("*")) if p.is_file()}
    return Mined(record=record, files=files, scratch=tmp)


def homes_task(wants: dict[str, tuple[str, str | None]], docker: bool) -> list[str]:
    """The repositories whose environment (and, with docker, image) this node holds."""
    from featdel.env import envs

    have = [name for name, (env_dir, _) in wants.items() if env_dir and envs.load(Path(env_dir)) is not None]
    if docker:
        from featdel.sandboxes.images import image_exists

        have = [name for name in have if not wants[name][1] or image_exists(wants[name][1])]
    return have


class RayExecutor:
    name = "ray"

    def __init__(self, *, address: str | None = None, num_cpus: int = 1, max_retries: int = 3):
        try:
            import ray  # noqa: F401
        except ImportError:
            raise FeatdelError("--executor ray needs Ray: pip install 'featdel[ray]'") from None
        self.address, self.num_cpus, self.max_retries = address, max(1, num_cpus), max_retries

    def _ray(self):
        import ray

        if not ray.is_initialized():
            quiet = {"log_to_driver": False, "logging_level": "warning"}
            if self.address or os.environ.get("RAY_ADDRESS"):
                ray.init(address=self.address, **quiet)
            else:
                ray.init(num_cpus=self.num_cpus, include_dashboard=False, **quiet)
        return ray

    def _remote(self, fn: Callable):
        if fn.__name__ not in _REMOTES:
            _REMOTES[fn.__name__] = self._ray().remote(fn)
        return _REMOTES[fn.__name__]

    def _stream(self, items: list, submit: Callable, lost: Callable, on_step) -> Iterator:
        """Results of `submit(item)` as they finish; `lost(item, error)` for a task Ray gave up on."""
        if not items:
            return
        ray = self._ray()
        window = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
        queue, pending = list(items), {}
        try:
            while queue or pending:
                while queue and len(pending) < window:
                    item = queue.pop(0)
                    pending[submit(item)] = item
                    on_step(getattr(item, "deletion_id", None) or item.source, "on ray")
                [ready], _ = ray.wait(list(pending), num_returns=1)
                item = pending.pop(ready)
                try:
                    result = ray.get(ready)
                except ray.exceptions.RayError as exc:
                    result = lost(item, f"{type(exc).__name__}: {exc}")
                yield result
        finally:
            for ref in pending:  # interrupted: stop what is still running
                ray.cancel(ref, force=True)

    def mine(self, entries, run_dir, *, backend, thresholds, on_step):
        if not entries:
            return
        spec = sandbox_spec(backend)
        task = self._remote(mine_task).options(max_retries=self.max_retries, num_cpus=1)

        def lost(entry, why: str) -> Mined:
            return Mined(record=RepoRecord(source=entry.source, name=entry.source, status=RepoStatus.BROKEN,
                                           reason=_died(why)))

        for mined in self._stream(entries, lambda e: task.remote(e, spec, thresholds), lost, on_step):
            record = mined.record
            if mined.scratch and mined.scratch in record.reason:
                from dataclasses import replace

                record = replace(record, reason=record.reason.replace(mined.scratch, str(run_dir)))
            yield Mined(record=record, files=mined.files)

    def verify(self, deletions, run_dir, records, *, backend, opts, on_step):
        from featdel.pipeline.verify import unavailable

        if not deletions:  # nothing left (a resumed run): no cluster to start
            return
        ray = self._ray()
        spec = sandbox_spec(backend)
        files, ready = {}, []
        for name in sorted({d.repo for d in deletions}):
            try:
                files[name] = ray.put(repo_files(run_dir, name)) if name in records else None
            except OSError as exc:
                files[name] = f"repo context unavailable: {exc}"
        for d in deletions:
            if d.repo not in records or isinstance(files[d.repo], str):
                ready.append(unavailable(d, files.get(d.repo) or f"repo context unavailable: {d.repo!r}"))
        yield from ready
        todo = [d for d in deletions if d.repo in records and not isinstance(files[d.repo], str)]
        homes = self._homes({d.repo: records[d.repo] for d in todo}, spec[0] == "docker")
        task = self._remote(verify_task)

        def submit(d: Deletion):
            where = {"scheduling_strategy": next(homes[d.repo])} if d.repo in homes else {}
            placed = task.options(max_retries=self.max_retries, num_cpus=1, **where)
            return placed.remote(records[d.repo], files[d.repo], d, opts, spec)

        def lost(d: Deletion, why: str) -> Verdict:
            return Verdict(deletion_id=d.deletion_id, repo=d.repo, strategy=d.strategy, target=d.target,
                           status=VerdictStatus.BROKEN, stage="sandbox", rule="sandbox.worker_died",
                           reason=_died(why))

        yield from self._stream(todo, submit, lost, on_step)

    def _homes(self, records: dict[str, RepoRecord], docker: bool) -> dict[str, Iterator]:
        """Per repository, a round robin over the nodes (with CPUs) that hold its environment."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray()
        wants = {name: (r.env_dir or "", r.image_name) for name, r in records.items()}
        probe = self._remote(homes_task)
        asked = {n["NodeID"]: probe.options(max_retries=1, num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(
            n["NodeID"], soft=False)).remote(wants, docker)
            for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) > 0}
        found: dict[str, list] = {}
        for node, ref in asked.items():
            try:
                have = ray.get(ref, timeout=300)
            except ray.exceptions.RayError:
                continue  # a node that cannot answer gets none of this run's candidates
            for name in have:
                found.setdefault(name, []).append(NodeAffinitySchedulingStrategy(node, soft=False))
        return {name: itertools.cycle(strategies) for name, strategies in found.items()}


def _died(why: str) -> str:
    first = (why.strip().splitlines() or ["?"])[0]
    return f"the Ray worker died on every try: {first[:200]}"


"""`featdel run`'s first three stages overlapped: one pool of `jobs` threads in which a repository
is deleted from as soon as it is mined, and its deletions verified as soon as they are made,
while other repositories are still mining. The stages one after another leave cores idle at each
boundary (three repositories on two threads: the last one mines alone); here the next stage's
work fills them.

In: corpus entries, a run directory, a sandbox backend and the stage options. Out: the run
directory as `mine`, `delete_all` and `verify_all` would leave it (the same records, deletions
and verdicts; only the order of lines differs), resumable the same way: a mined repository is
not mined again, a deleted one (its marker) not deleted again, a verdict never written twice.
With the `combine` strategy, a repository's combine pass (featdel.pipeline.delete.combine_all)
runs as soon as its last deletion has a verdict, and its combined deletions are verified here
too; `verify_stage` after it finds them done. Packaging comes after (featdel.pipeline.run).
Which task a free thread takes is `_next`'s choice (the earliest stage, then the repository with
the most verification ahead); sources are fetched ahead on threads of their own (`_pin`), so no thread
of the pool waits on a download. Threads only: with a Ray executor, or one job, the stages run
one after another.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path

from featdel.core.progress import StepProgress
from featdel.core.records import RepoRecord, RepoStatus
from featdel.core.rundir import RunDir

_FIRST = {"mine": 0, "delete": 1, "verify": 2}


def overlapped(entries, run_dir: Path, backend, *, thresholds, plan, max_candidates: int, seed: int,
               strategy_options: dict | None, check_for: Callable[[RepoRecord], Callable], verify_opts,
               jobs: int, on_mined: Callable[[list[RepoRecord]], None] = lambda records: None) -> None:
    """Mine `entries`, delete from each mined repository and verify its deletions, `jobs` threads
    at a time (see the module docstring). `on_mined` sees every entry's record once mining is
    over: at once when none is usable (it may raise to stop the run), else after the progress bar."""
    from featdel.pipeline.delete import combine_all, delete_repo
    from featdel.pipeline.mine import mine_one
    from featdel.pipeline.verify import SPEED_ONLY, Runners, verify_in

    run_dir = run_dir.resolve()
    rd = RunDir(run_dir)
    repos = rd.latest_repos()
    rd.stage_options("mined", {"thresholds": dataclasses.asdict(thresholds), "sandbox": getattr(backend, "name", "")},
                     started=bool(repos))
    rd.stage_options("deleted", plan.options, started=any(rd.deleted_marker(r.name).exists() for r in rd.mined()))
    verdicts = {v.deletion_id for v in rd.verdicts()}
    rd.stage_options("verified", dataclasses.asdict(verify_opts), speed_only=SPEED_ONLY,
                     started=any(d.deletion_id in verdicts for d in rd.deletions()))
    records = {r.name: r for r in repos.values()}
    contexts: dict = {}
    runners = Runners()
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    # Sources are fetched ahead of their mining, on threads of their own: a download waits on the
    # network, not on a core, and mining then finds the source in the cache.
    pins = ThreadPoolExecutor(max_workers=_PIN_THREADS, thread_name_prefix="featdel-pin")
    running: dict = {}  # future -> (kind, item)
    pending: list = []  # (kind, order, item, fn, args, kw), taken by `_next`
    order = itertools.count()

    with StepProgress("running", [e.source for e in entries]) as progress:
        left: dict[str, int] = {}  # repository name -> its deletions not yet verified
        total: dict[str, int] = {}
        combine = "combine" in plan.options.get("strategies", [])
        combined: set[str] = set()  # repositories whose combine pass ran here

        def step(source: str, what: str) -> None:
            rd.add_progress("mine", source, what)
            progress.step(source, what)

        def submit(kind: str, item, fn, *args, **kw) -> None:
            pending.append((kind, next(order), item, fn, args, kw))

        def fill() -> None:
            while pending and len(running) < max(1, jobs):
                kind, _, item, fn, args, kw = _next(pending, combined, combine)
                running[pool.submit(fn, *args, **kw)] = (kind, item)

        def to_delete(record: RepoRecord) -> None:
            if rd.deleted_marker(record.name).exists():
                to_verify(record, [d for d in rd.deletions() if d.repo == record.name])
            else:
                progress.step(record.source, "deleting")
                submit("delete", record, _delete, delete_repo, record, run_dir, plan=plan,
                       max_candidates=max_candidates, seed=seed, check_factory=check_for(record),
                       strategy_options=strategy_options)

        def to_verify(record: RepoRecord, deletions) -> None:
            todo = [d for d in deletions if d.deletion_id not in verdicts]
            left[record.name], total[record.name] = len(todo), len(todo)
            if not todo:
                progress.step(record.source, "done")
            for d in todo:
                submit("verify", record, verify_in, contexts, run_dir, records, d, backend, verify_opts, runners)
            if todo:
                progress.step(record.source, f"verifying 0/{len(todo)}")

        try:
            for entry in entries:
                record = repos.get(entry.source)
                if record is not None and record.status != RepoStatus.BROKEN:
                    step(entry.source, "resumed")
                    if record.status == RepoStatus.MINED:
                        to_delete(record)
                    else:
                        progress.step(entry.source, "done")
                else:
                    pinned = pins.submit(_pin, entry.source)
                    submit("mine", entry, _mine, pinned, mine_one, entry, run_dir, backend=backend,
                           thresholds=thresholds, on_step=step)
            mining = sum(task[0] == "mine" for task in pending)
            told = False

            def mined() -> list[RepoRecord]:
                return [repos[e.source] for e in entries if e.source in repos]

            if not mining and not any(r.status == RepoStatus.MINED for r in mined()):
                told = True
                on_mined(mined())
            fill()
            while running:
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    kind, item = running.pop(future)
                    result = future.result()
                    if kind == "mine":
                        rd.add_repo(result)
                        repos[result.source], records[result.name] = result, result
                        rd.add_progress("mine", result.source, "done")
                        mining -= 1
                        if result.status == RepoStatus.MINED:
                            to_delete(result)
                        else:
                            progress.step(result.source, "done")
                        if not mining and not any(r.status == RepoStatus.MINED for r in mined()):
                            told = True
                            on_mined(mined())  # nothing to delete from: it may stop the run here
                    elif kind == "delete":
                        to_verify(item, result)
                    else:
                        rd.add_verdict(result)
                        verdicts.add(result.deletion_id)
                        left[item.name] -= 1
                        if not left[item.name] and combine and item.name not in combined:
                            # Its verified deletions joined as the combine pass would join them
                            combined.add(item.name)
                            progress.step(item.source, "combining")
                            to_verify(item, combine_all(run_dir, seed=seed, repos={item.name}))
                            continue
                        progress.step(item.source, "done" if not left[item.name] else
                                      f"verifying {total[item.name] - left[item.name]}/{total[item.name]}")
                fill()
        finally:
            pins.shutdown(wait=True, cancel_futures=True)
            pool.shutdown(wait=True, cancel_futures=True)
            runners.close()
    if not told:
        on_mined(mined())


def _next(pending: list, combined: set[str], combine: bool) -> tuple:
    """Take the task to start next from `pending`: the earliest stage first (a repository still
    to mine or delete opens more work, and left behind, its verifications would end the run
    alone); among verifications, those of the repository with the longest chain of work still
    ahead (`_ahead`), so that no repository's combine pass, which waits for all its candidates,
    is left to run alone at the end; else first come, first served."""
    ahead = _ahead(pending, combined, combine)

    def key(task) -> tuple:
        kind, order, item = task[:3]
        if kind != "verify":
            return _FIRST[kind], 0, order
        return _FIRST[kind], -ahead[item.name], order

    best = min(range(len(pending)), key=lambda i: key(pending[i]))
    return pending.pop(best)


# A repository's verification work ahead, in its suite's seconds: a candidate about two suites
# (the rejected ones stop early, the verified ones run several selections and two gradings), a
# combined deletion about eight (its tests are those of all its parts).
_CANDIDATE_SUITES, _COMBINED_SUITES = 2.0, 8.0


def _ahead(pending: list, combined: set[str], combine: bool) -> dict[str, float]:
    """Repository name -> the seconds of verification its chain still holds: its waiting
    candidates, and its combine pass when one is still to come (the strategy is on and the pass
    has not run)."""
    units: dict[str, float] = {}
    suite: dict[str, float] = {}
    for kind, _, item, *_ in pending:
        if kind != "verify":
            continue
        if item.name not in units:  # its combine pass, when one is still to come
            suite[item.name] = max(item.suite_seconds, 0.01)
            units[item.name] = _COMBINED_SUITES if combine and item.name not in combined else 0.0
        units[item.name] += _COMBINED_SUITES if item.name in combined else _CANDIDATE_SUITES
    return {name: n * suite[name] for name, n in units.items()}


_PIN_THREADS = 4


def _pin(source: str) -> None:
    """Fetch `source` into the cache ahead of its mining. A failure here is mining's to meet
    again and record (`mine_one` pins every source itself)."""
    from featdel.env import sources

    try:
        sources.resolve(source)
    except Exception:  # noqa: BLE001 - mining pins it again and records why it failed
        pass


def _mine(pinned, mine_one, *args, **kw):
    """`mine_one` once its source's fetch (`_pin`) is over: never two fetches of one source."""
    pinned.result()
    return mine_one(*args, **kw)


def _delete(delete_repo, record: RepoRecord, run_dir: Path, *, check_factory, **kw):
    """`delete_repo`, closing the check factory's warm runners after the repository."""
    try:
        return delete_repo(record, run_dir, check_factory=check_factory, **kw)
    finally:
        getattr(check_factory, "close", lambda: None)()

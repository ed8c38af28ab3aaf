"""Warm sandboxes against a fresh sandbox per test run: whole-validation time per candidate.

Mines real PyPI libraries (local backend), makes one set of deletions, then verifies every
deletion with `verify_one` in both modes on each backend: `warm_sandbox=False` (a fresh sandbox
for each of the candidate's test runs, as before) and `warm_sandbox=True` (one sandbox per
candidate, reset between runs). The modes alternate per candidate (fresh first, then warm
first) so that load from elsewhere on a shared machine falls on both alike. Prints seconds per
candidate for each mode, the ratio fresh/warm, and whether the verdicts agree (status, stage,
F2P and P2P lists). On a shared machine pytest's own time swings with the load and swamps the
difference, so the seconds spent opening, resetting and closing sandboxes (everything of a
sandbox but its commands) are timed apart and printed too. The docker rows need an engine and
the base image; they are skipped with a note otherwise (the repo image is built from the mined
env).

    .venv/bin/python bench/warm_sandboxes.py [--candidates 6] [--reruns 2] [pypi:NAME==VER ...]
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from featdel.core.records import RepoStatus, Verdict
from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.mine import _repo_image, mine
from featdel.pipeline.verify import VerifyOptions, verify_one
from featdel.sandboxes import get_backend
from featdel.sandboxes.images import BASE_IMAGE, engine_reason, image_exists

DEFAULT = ["pypi:inflection==0.5.1"]


class Timed:
    """A backend whose sandboxes add the seconds of `open`, `reset` and `close` to `spent`."""

    def __init__(self, backend) -> None:
        self.backend, self.name, self.spent = backend, backend.name, 0.0

    def unavailable(self) -> str | None:
        return self.backend.unavailable()

    def _timed(self, fn, *args):
        start = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.spent += time.perf_counter() - start

    def open(self, spec):
        box = self._timed(self.backend.open, spec)
        reset, close = box.reset, box.close
        box.reset = lambda: self._timed(reset)
        box.close = lambda: self._timed(close)
        return box


def same(a: Verdict, b: Verdict) -> bool:
    return (a.status, a.stage, a.FAIL_TO_PASS, a.PASS_TO_PASS) == (b.status, b.stage, b.FAIL_TO_PASS, b.PASS_TO_PASS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sources", nargs="*", default=DEFAULT)
    ap.add_argument("--candidates", type=int, default=6, help="deletions per repository")
    ap.add_argument("--reruns", type=int, default=2)
    ap.add_argument("--backends", nargs="+", default=["local", "docker"])
    args = ap.parse_args()
    local = get_backend("local")
    root = Path(tempfile.mkdtemp(prefix="featdel-bench-warm-"))
    records = mine([CorpusEntry(source=s, overrides=Overrides()) for s in args.sources], root, backend=local)
    print("mined:", ", ".join(f"{r.name} ({r.status}, {r.passed} passing, suite {r.suite_seconds}s)" for r in records))
    delete_all(root, strategies=["body", "function", "method", "class", "feature"], max_candidates=args.candidates,
               seed=0, keep_docstrings=True, check_for=lambda r: make_check(RepoContext.load(root, r), local))
    contexts = {r.name: RepoContext.load(root, r) for r in records if r.status == RepoStatus.MINED}
    deletions = [d for d in RunDir(root).deletions() if d.repo in contexts]
    backends = {}
    for name in args.backends:
        reason = None
        if name == "docker":
            reason = engine_reason() or (None if image_exists(BASE_IMAGE) else
                                         f"no image {BASE_IMAGE}: run `featdel sandbox build --base-only`")
        if reason:
            print(f"({name} rows skipped: {reason})")
            continue
        backend = Timed(get_backend(name))
        ctxs = contexts if name == "local" else {
            k: dataclasses.replace(c, image=_repo_image(c.env)) for k, c in contexts.items()}
        backends[name] = (backend, ctxs)
    print(f"{len(deletions)} candidates; backends: {', '.join(backends)}\n")
    seconds = {(b, m): [] for b in backends for m in ("fresh", "warm")}
    lifecycle = {(b, m): 0.0 for b in backends for m in ("fresh", "warm")}
    agree = {b: 0 for b in backends}
    for i, deletion in enumerate(deletions):
        for name, (backend, ctxs) in backends.items():
            verdicts = {}
            for mode in (("fresh", "warm") if i % 2 == 0 else ("warm", "fresh")):
                opts = VerifyOptions(reruns=args.reruns, warm_sandbox=mode == "warm")
                start, before = time.perf_counter(), backend.spent
                verdicts[mode] = verify_one(ctxs[deletion.repo], deletion, backend, opts)
                seconds[name, mode].append(time.perf_counter() - start)
                lifecycle[name, mode] += backend.spent - before
            agree[name] += same(verdicts["fresh"], verdicts["warm"])
            f, w = seconds[name, "fresh"][-1], seconds[name, "warm"][-1]
            print(f"{deletion.deletion_id[:48]:<50}{name:<8}{verdicts['warm'].status:>9}/{verdicts['warm'].stage:<7}"
                  f"fresh {f:6.1f}s  warm {w:6.1f}s  {f / w:5.2f}x")
    print(f"\n{'backend':<9}{'candidates':>11}{'fresh s/cand':>14}{'warm s/cand':>13}{'fresh/warm':>12}"
          f"{'median ratio':>14}{'same verdict':>14}{'open/reset/close s/cand fresh, warm':>37}")
    for name in backends:
        fresh, warm = seconds[name, "fresh"], seconds[name, "warm"]
        if not fresh:
            continue
        ratios = statistics.median(f / w for f, w in zip(fresh, warm, strict=True))
        print(f"{name:<9}{len(fresh):>11}{sum(fresh) / len(fresh):>14.2f}{sum(warm) / len(warm):>13.2f}"
              f"{sum(fresh) / sum(warm):>11.2f}x{ratios:>13.2f}x{agree[name]:>9}/{len(fresh)}"
              f"{lifecycle[name, 'fresh'] / len(fresh):>26.2f}, {lifecycle[name, 'warm'] / len(warm):.2f}")
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

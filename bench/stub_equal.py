"""What the equal-to-anything stub variants take out: the same deletions verified twice, once with
the trivial stub bodies only (`pass`, `return None`, the first argument) and once with the
`equal_anything` and `equal_typed` variants too (featdel.deletion.equal_stub).

    .venv/bin/python bench/stub_equal.py --workdir /tmp/se --candidates 8 pypi:natsort==8.4.0

Prints, per candidate, both verdicts, the F2P count each leaves and the tests only the new
variants pass; then the totals: F2P tests and tasks the new variants removed. `--workdir` keeps
the runs and resumes them (a mined or deleted `base` there is reused).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from featdel.core.records import Verdict, VerdictStatus
from featdel.core.rundir import RunDir
from featdel.deletion import quality
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.mine import mine
from featdel.pipeline.verify import VerifyOptions, verify_all
from featdel.sandboxes import get_backend

MODES = {"trivial": quality.LABELS[:3], "equal": quality.LABELS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=["pypi:natsort==8.4.0"])
    parser.add_argument("--candidates", type=int, default=8, help="deletions per repository")
    parser.add_argument("--reruns", type=int, default=2)
    parser.add_argument("--strategies", nargs="+", default=["body", "function", "method", "class", "feature"],
                        help="after the sources, or it takes them too")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary dir, removed)")
    args = parser.parse_args()
    backend = get_backend("local")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="featdel-bench-"))
    base = root / "base"
    mined = {r.source for r in RunDir(base).mined()}
    if mined and mined != set(args.sources):
        raise SystemExit(f"{base} holds {sorted(mined)}, not {args.sources}: give another --workdir")
    if not mined:
        mine([CorpusEntry(source=s, overrides=Overrides()) for s in args.sources], base, backend=backend)
    delete_all(base, strategies=args.strategies, max_candidates=args.candidates, seed=0, keep_docstrings=True,
               check_for=lambda r: make_check(RepoContext.load(base, r), backend))
    results: dict[str, dict[str, Verdict]] = {}
    for mode, labels in MODES.items():
        run = root / mode
        if not run.exists():
            shutil.copytree(base, run)
            (run / "verdicts.jsonl").unlink(missing_ok=True)
        quality.LABELS = labels  # stub_variants reads it per call; the verifier runs in this process
        verdicts = verify_all(run, backend, VerifyOptions(reruns=args.reruns))
        results[mode] = {v.deletion_id: v for v in verdicts if v.stage != "delete"}
    old, new = results["trivial"], results["equal"]
    removed_tests, removed_tasks = 0, 0
    print(f"{'candidate':<58}{'trivial only':>22}{'with equal':>22}{'F2P':>9}")
    for i in sorted(set(old) & set(new)):
        a, b = old[i], new[i]
        f2p = f"{len(a.FAIL_TO_PASS)}->{len(b.FAIL_TO_PASS)}"
        print(f"{i[:57]:<58}{a.status + '/' + a.stage:>22}{b.status + '/' + b.stage:>22}{f2p:>9}")
        if a.status == VerdictStatus.VERIFIED:
            gone = sorted(set(a.FAIL_TO_PASS) - set(b.FAIL_TO_PASS))
            removed_tests += len(gone)
            removed_tasks += b.status != VerdictStatus.VERIFIED
            for t in gone[:3]:  # natsort's parametrised ids carry whole regexes
                print(f"    only an equal-to-anything stub passes: {_short(t)}")
            if b.status != VerdictStatus.VERIFIED:
                print(f"    {b.stage}: {_short(b.reason.partition(', e.g.')[0])}")
    ok = {m: sum(v.status == VerdictStatus.VERIFIED for v in r.values()) for m, r in results.items()}
    secs = {m: sum(v.test_seconds for v in r.values()) for m, r in results.items()}
    print(f"\nverified: {ok['trivial']} with the trivial stubs, {ok['equal']} with the equal-to-anything ones too; "
          f"F2P tests removed: {removed_tests}; tasks removed: {removed_tasks}; "
          f"test seconds {secs['trivial']:.0f} -> {secs['equal']:.0f}")
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)


def _short(text: str, limit: int = 100) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


if __name__ == "__main__":
    main()

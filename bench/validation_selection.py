"""Coverage-selected validation against whole-suite validation (as SWE-smith does), side by side.

Mines real PyPI libraries, makes one set of deletions, then verifies the *same* deletions twice:
once running the tests the coverage map ties to the deleted code plus a P2P sample (featdel's
default), once running the whole suite per candidate (`--full-suite`). Prints sandbox
test-seconds per valid task for each and their ratio, and how well the labels agree: same
verdict, identical F2P lists, and selected P2P contained in the full-suite P2P.

    .venv/bin/python bench/validation_selection.py [--candidates 8] [pypi:NAME==VER ...]

Also prints the ratio over every candidate both modes finished (rejected ones included), since
on a large suite few candidates may verify. `--workdir DIR` keeps the runs (verdicts.jsonl per
mode) for inspection after a long run. `--only selected` (or `full`) with the `--workdir` of an
earlier run verifies that mode again on the same mined repository and deletions and compares it
with the other mode's kept verdicts: after a fix to one mode, the other need not run again.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from featdel.core.records import Verdict, VerdictStatus
from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import delete_all
from featdel.pipeline.mine import mine
from featdel.pipeline.verify import VerifyOptions, verify_all
from featdel.sandboxes import get_backend

DEFAULT = ["pypi:inflection==0.5.1", "pypi:cachetools==5.5.0", "pypi:toolz==1.0.0"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=DEFAULT)
    parser.add_argument("--candidates", type=int, default=4, help="deletions per repository")
    parser.add_argument("--reruns", type=int, default=3)
    parser.add_argument("--strategies", nargs="+", default=["body", "function", "method", "class", "feature"])
    parser.add_argument("-j", "--jobs", type=int, default=1, help="candidates verified in parallel")
    parser.add_argument("--workdir", type=Path, help="keep the runs here (default: a temporary dir, removed)")
    parser.add_argument("--only", choices=["selected", "full"],
                        help="verify this mode again in --workdir's earlier run; keep the other mode's verdicts")
    args = parser.parse_args()
    if args.only and not (args.workdir and (args.workdir / "base" / "deletions.jsonl").is_file()):
        parser.error("--only needs the --workdir of an earlier run (its base/deletions.jsonl)")
    backend = get_backend("local")
    root = args.workdir or Path(tempfile.mkdtemp(prefix="featdel-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    base = root / "base"
    if not args.only:
        records = mine([CorpusEntry(source=s, overrides=Overrides()) for s in args.sources], base, backend=backend)
        print("mined:", ", ".join(f"{r.name} ({r.status}, {r.passed} passing)" for r in records))
        delete_all(base, strategies=args.strategies, max_candidates=args.candidates,
                   seed=0, keep_docstrings=True, check_for=lambda r: make_check(RepoContext.load(base, r), backend))
    results: dict[str, dict[str, Verdict]] = {}
    for mode in ("selected", "full"):
        run = root / mode
        if args.only and mode != args.only:
            results[mode] = {v.deletion_id: v for v in RunDir(run).verdicts() if v.stage != "delete"}
            print(f"{mode}: {len(results[mode])} verdicts kept from {run}")
            continue
        shutil.rmtree(run, ignore_errors=True)
        shutil.copytree(base, run)
        (run / "verdicts.jsonl").unlink(missing_ok=True)
        opts = VerifyOptions(reruns=args.reruns, full_suite=mode == "full")
        results[mode] = {v.deletion_id: v for v in verify_all(run, backend, opts, jobs=args.jobs)
                         if v.stage != "delete"}
    sel, full = results["selected"], results["full"]
    print(f"\n{'mode':<10}{'candidates':>11}{'verified':>10}{'test s':>10}{'s / task':>10}")
    per_task = {}
    for mode, verdicts in results.items():
        ok = [v for v in verdicts.values() if v.status == VerdictStatus.VERIFIED]
        seconds = sum(v.test_seconds for v in verdicts.values())
        per_task[mode] = seconds / max(len(ok), 1)
        print(f"{mode:<10}{len(verdicts):>11}{len(ok):>10}{seconds:>10.1f}{per_task[mode]:>10.2f}")
    print(f"\nfull-suite / coverage-selected test-seconds per valid task: {per_task['full'] / per_task['selected']:.2f}x")
    both = [i for i in sel if i in full]
    print(f"\n{'candidate':<60}{'verdict (selected / full)':>34}{'selected s':>12}{'full s':>9}")
    for i in both:
        print(f"{i[:59]:<60}{sel[i].status + '/' + sel[i].stage + ' ' + full[i].status + '/' + full[i].stage:>34}"
              f"{sel[i].test_seconds:>12.1f}{full[i].test_seconds:>9.1f}")
    spent = {mode: sum(r[i].test_seconds for i in both) for mode, r in results.items()}
    print(f"full-suite / coverage-selected test-seconds per candidate, over all {len(both)}: "
          f"{spent['full'] / max(spent['selected'], 1e-9):.2f}x")
    same_status = sum(sel[i].status == full[i].status for i in both)
    same_rule = sum(sel[i].rule == full[i].rule for i in both)
    verified = [i for i in both if sel[i].status == full[i].status == VerdictStatus.VERIFIED]
    same_f2p = sum(sel[i].FAIL_TO_PASS == full[i].FAIL_TO_PASS for i in verified)
    p2p_inside = sum(set(sel[i].PASS_TO_PASS) <= set(full[i].PASS_TO_PASS) for i in verified)
    print(f"same verdict: {same_status}/{len(both)}; same rule: {same_rule}/{len(both)}; identical F2P: "
          f"{same_f2p}/{len(verified)}; selected P2P within full P2P: {p2p_inside}/{len(verified)}")
    # Any disagreement is a bug in the change-scoped mode, not a rate: name it and fail.
    bad = [i for i in both if sel[i].status != full[i].status or sel[i].rule != full[i].rule
           or (i in verified and (sel[i].FAIL_TO_PASS != full[i].FAIL_TO_PASS
                                  or not set(sel[i].PASS_TO_PASS) <= set(full[i].PASS_TO_PASS)))]
    for i in bad:
        print(f"DISAGREE {i}: selected {sel[i].status}/{sel[i].rule} ({sel[i].reason[:120]}) | "
              f"full {full[i].status}/{full[i].rule} ({full[i].reason[:120]})")
    if bad:
        raise SystemExit(1)
    for i in both:
        if sel[i].status != full[i].status or (i in verified and sel[i].FAIL_TO_PASS != full[i].FAIL_TO_PASS):
            extra = sorted(set(full[i].FAIL_TO_PASS) - set(sel[i].FAIL_TO_PASS))[:3]
            print(f"  differs: {i}: {sel[i].status}/{sel[i].stage} vs {full[i].status}/{full[i].stage}; "
                  f"F2P only in full: {extra}")
    if args.workdir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

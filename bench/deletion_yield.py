"""Deletion yield and task size per strategy: the default corpus and three other libraries, side by side.

Mines the libraries (or resumes a work directory), deletes with every candidate strategy, verifies
with the grading issue's gates in force (stub, similarity, leak, noop, gold through the grader),
tops up strategies the mix left without a verified task on a library (`--top-up`, default
`feature`: up to 3 candidates of its own per round; each `--top-up-seed` is one round), then runs `combine` over the verified deletions and
verifies those as a whole. Prints, per
strategy and per group (default corpus / others): candidates (deletions a strategy produced,
those the build check rolled back included), refusals (targets a strategy declined: not
candidates), verified, yield = verified / candidates; then the distributions (median [p25-p75]
max) of deleted lines, deleted symbols, files touched and F2P tests over verified tasks; then the
refusals and rejections by reason. Resumable: every stage skips what the work directory holds.

    .venv/bin/python bench/deletion_yield.py [--work runs/yield] [--candidates 8] [-j 2]

A JavaScript/TypeScript corpus runs the same way, alone (no Python others; the feature top-up is
Python's), with its git sources mapped to mirrors as corpora/js.toml's comment says:

    .venv/bin/python bench/deletion_yield.py --corpus corpora/js.toml --others --top-up --work runs/yield-js --candidates 3
"""

from __future__ import annotations

import argparse
import statistics
from collections import Counter, defaultdict
from pathlib import Path

from featdel.core.rundir import RunDir
from featdel.env.corpus import CorpusEntry, load
from featdel.env.recipe import Overrides
from featdel.pipeline.context import RepoContext, make_check
from featdel.pipeline.delete import SeededPlanner, combine_all, delete_all, delete_repo
from featdel.pipeline.mine import mine
from featdel.pipeline.verify import VerifyOptions, verify_all
from featdel.sandboxes import get_backend

OTHERS = ["pypi:humanize==4.11.0", "pypi:itsdangerous==2.2.0", "pypi:parse==1.20.2"]
STRATEGIES = ["body", "function", "method", "class", "file", "feature"]


def run(work: Path, default: list[str], others: list[str], candidates: int, jobs: int, top_up: list[str],
        top_up_seed: int) -> RunDir:
    backend = get_backend("local")
    entries = [CorpusEntry(source=s, overrides=Overrides()) for s in default + others]
    mine(entries, work, backend=backend, jobs=jobs)
    delete_all(work, strategies=STRATEGIES, max_candidates=candidates, seed=0, keep_docstrings=True,
               check_for=lambda r: make_check(RepoContext.load(work, r), backend))
    rd = RunDir(work)
    verify_all(work, backend, VerifyOptions(), jobs=jobs)
    for record in rd.mined():  # a strategy the mix left without a verified task gets a few candidates
        for name in top_up:
            marker = rd.root / "repos" / record.name / f"topup-{name}-{top_up_seed}.done"
            won = {v.deletion_id for v in rd.verdicts() if v.status == "verified" and v.strategy == name}
            if marker.exists() or any(d.repo == record.name and d.deletion_id in won for d in rd.deletions()):
                continue
            plan = SeededPlanner(strategies=[name], max_candidates=3, seed=top_up_seed)
            delete_repo(record, work, plan=plan, max_candidates=3, seed=top_up_seed,
                        check_factory=make_check(RepoContext.load(work, record), backend))
            marker.write_text("done")
    verify_all(work, backend, VerifyOptions(), jobs=jobs)
    combine_all(work, seed=0)
    verify_all(work, backend, VerifyOptions(), jobs=jobs)
    return RunDir(work)


def _spread(values: list[int]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"{statistics.median(values):g} [{q[0]:g}-{q[2]:g}] {max(values)}"


def _deleted_lines(patch: str) -> int:
    return sum(1 for ln in patch.splitlines() if ln.startswith("-") and not ln.startswith("---"))


def report(rd: RunDir, groups: dict[str, str]) -> None:
    deletions = {d.deletion_id: d for d in rd.deletions()}
    verdicts = {v.deletion_id: v for v in rd.verdicts()}.values()  # the last verdict of each
    rows: dict[tuple[str, str], Counter] = defaultdict(Counter)
    sizes: dict[tuple[str, str], dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
    refusals: Counter = Counter()
    rejections: Counter = Counter()
    for v in verdicts:
        group = groups.get(v.repo, "other")
        for key in ((v.strategy, group), ("all", group)):
            if v.status == "refused":
                rows[key]["refused"] += 1
                continue
            rows[key]["candidates"] += 1
            rows[key][v.status] += 1
            if v.status == "verified":
                d = deletions[v.deletion_id]
                s = sizes[key]
                s["lines"].append(_deleted_lines(v.deletion_patch))
                s["symbols"].append(len(d.deleted_symbols))
                s["files"].append(len(d.files))
                s["f2p"].append(len(v.FAIL_TO_PASS))
        if v.status == "refused":
            refusals[(v.strategy, v.rule)] += 1
        elif v.status != "verified":
            rejections[(v.strategy, f"{v.status}/{v.rule}")] += 1
    names = [*STRATEGIES, "combine", "all"]
    print(f"{'strategy':<9}| {'default corpus: cand refused verified yield':<44}| others: cand refused verified yield")
    for name in names:
        cells = []
        for group in ("default", "other"):
            c = rows[(name, group)]
            y = f"{100 * c['verified'] / c['candidates']:.0f}%" if c["candidates"] else "-"
            cells.append(f"{c['candidates']:>5} {c['refused']:>7} {c['verified']:>8} {y:>6}")
        print(f"{name:<9}| {cells[0]:<44}| {cells[1]}")
    print("\nverified task size, median [p25-p75] max")
    print(f"{'strategy':<9}{'group':<9}{'n':>4}{'deleted lines':>24}{'symbols':>18}{'files':>14}{'F2P':>20}")
    for name in names:
        for group in ("default", "other"):
            s = sizes[(name, group)]
            if s["lines"]:
                print(f"{name:<9}{group:<9}{len(s['lines']):>4}{_spread(s['lines']):>24}{_spread(s['symbols']):>18}"
                      f"{_spread(s['files']):>14}{_spread(s['f2p']):>20}")
    per_repo = defaultdict(set)
    for v in verdicts:
        if v.status == "verified":
            per_repo[v.strategy].add(v.repo)
    print("\nlibraries with a verified task:", {k: sorted(v) for k, v in sorted(per_repo.items())})
    print("\nrefusals by reason (not candidates)")
    for (name, why), n in sorted(refusals.items(), key=lambda kv: (kv[0][0], -kv[1])):
        print(f"  {name:<9}{n:>4}  {why}")
    print("\ncandidates not verified, by reason")
    for (name, why), n in sorted(rejections.items(), key=lambda kv: (kv[0][0], -kv[1])):
        print(f"  {name:<9}{n:>4}  {why}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/yield"))
    parser.add_argument("--corpus", type=Path, default=Path("corpora/default.toml"))
    parser.add_argument("--others", nargs="*", default=OTHERS)
    parser.add_argument("--candidates", type=int, default=8, help="candidates per repository")
    parser.add_argument("-j", "--workers", type=int, default=2)
    parser.add_argument("--top-up", nargs="*", default=["feature"],
                        help="strategies that get up to 3 candidates of their own on a library the mix left them none")
    parser.add_argument("--top-up-seed", type=int, default=1, help="a new seed gives a new top-up round")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    default = [e.source for e in load(args.corpus)]
    rd = RunDir(args.work) if args.report_only else run(args.work, default, args.others, args.candidates,
                                                         args.workers, args.top_up, args.top_up_seed)
    groups = {r.name: ("default" if r.source in default else "other") for r in rd.latest_repos().values()}
    report(rd, groups)


if __name__ == "__main__":
    main()

"""Yield with the install tools in the test view and out of it, on the libraries setuptools vendors.

    .venv/bin/python bench/install_tools_yield.py [--candidates 8] [-j 2] [--work DIR] [--only now] [SOURCE ...]

setuptools carries copies of more_itertools, ordered_set, packaging, jaraco.* and (older
releases) pyparsing, so when an environment keeps the install tools, a deletion from one of those
libraries finds its own code in the venv and the leak audit rejects it, correctly. featdel now
keeps pip, setuptools and wheel out of the environment (featdel.env.tools: the venv is made without
pip, the host's pip installs into it). This bench mines, deletes and verifies the same libraries
twice, each in its own empty cache: once with every tool installed into the venv and none removed
(`tools.keep_for` says all are needed, `tools.strip` does nothing: the view before issue 22),
once as featdel runs. Same seed, same strategies, same candidate count. Prints per library and mode:
candidates, verified, yield, and rejections at the leak gate; then whether the deletions were
the same in both modes. Resumable per mode under --work.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections import Counter
from pathlib import Path

DEFAULT = ["pypi:ordered-set==4.1.0", "pypi:more-itertools==10.5.0", "pypi:pyparsing==3.1.4",
           "pypi:packaging==24.1"]
STRATEGIES = ["body", "function", "method", "class", "feature"]


def one_mode(work: Path, sources: list[str], candidates: int, jobs: int, keep_tools: bool) -> dict:
    os.environ["FEATDEL_CACHE"] = str(work / "cache")
    from featdel.env import tools
    from featdel.env.corpus import CorpusEntry
    from featdel.env.recipe import Overrides
    from featdel.pipeline.context import RepoContext, make_check
    from featdel.pipeline.delete import delete_all
    from featdel.pipeline.mine import mine
    from featdel.pipeline.verify import VerifyOptions, verify_all
    from featdel.sandboxes import get_backend

    real_strip, real_keep = tools.strip, tools.keep_for
    if keep_tools:  # every tool installed into the venv and none removed: the view before issue 22
        tools.keep_for = lambda tree: set(tools.TOOLS)
        tools.strip = lambda venv, keep, log=None: []
    try:
        backend = get_backend("local")
        run = work / "run"
        records = mine([CorpusEntry(source=s, overrides=Overrides()) for s in sources], run, backend=backend,
                       jobs=jobs)
        for r in records:
            print(f"  mined {r.name}: {r.status} {r.passed} passing, suite {r.suite_seconds:.1f}s {r.reason}")
        delete_all(run, strategies=STRATEGIES, max_candidates=candidates, seed=0, keep_docstrings=True,
                   check_for=lambda r: make_check(RepoContext.load(run, r), backend))
        verdicts = verify_all(run, backend, VerifyOptions(), jobs=jobs)
    finally:
        tools.strip, tools.keep_for = real_strip, real_keep
    out: dict = {}
    for r in records:
        mine_v = [v for v in verdicts if v.repo == r.name and v.status != "refused"]
        rules = Counter(v.rule for v in mine_v if v.status == "rejected")
        out[r.name] = {"candidates": len(mine_v), "verified": sum(v.status == "verified" for v in mine_v),
                       "leak": sum(n for rule, n in rules.items() if rule.startswith("leak")),
                       "rules": rules, "targets": sorted(v.target for v in mine_v), "status": r.status}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("sources", nargs="*", default=DEFAULT)
    parser.add_argument("--candidates", type=int, default=8, help="deletions per repository")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None)
    parser.add_argument("--only", choices=["before", "now"], default=None, help="run one mode only")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="featdel-tools-"))
    results = {}
    modes = [m for m in (("tools kept (before)", True), ("tools removed (now)", False))
             if args.only is None or (args.only == "before") == m[1]]
    for mode, keep in modes:
        print(f"{mode}:")
        results[mode] = one_mode(work / ("kept" if keep else "removed"), args.sources, args.candidates, args.jobs, keep)
    print(f"\n{'library':<26}{'mode':<22}{'candidates':>11}{'verified':>9}{'yield':>7}{'leak':>6}  other rejections")
    before, after = results.get("tools kept (before)", {}), results.get("tools removed (now)", {})
    for name in before or after:
        for mode, res in results.items():
            r = res.get(name)
            if r is None:
                continue
            y = f"{100 * r['verified'] / r['candidates']:.0f}%" if r["candidates"] else "-"
            other = ", ".join(f"{k} {n}" for k, n in sorted(r["rules"].items()) if not k.startswith("leak"))
            print(f"{name:<26}{mode:<22}{r['candidates']:>11}{r['verified']:>9}{y:>7}{r['leak']:>6}  {other}")
        if before and after:
            same = name in after and before[name]["targets"] == after[name]["targets"]
            print(f"{'':<26}same candidates in both modes: {same}")


if __name__ == "__main__":
    main()

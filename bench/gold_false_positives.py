"""False positives of the hardened grader on honest work: every gold patch of one or more runs.

    python bench/gold_false_positives.py RUN_DIR [RUN_DIR ...] [--workdir DIR] [--learner]

For each run directory (from `featdel run` / `featdel package`), it writes a SWE-bench
predictions file holding every task's gold patch (the `patch` column of the task shards) and
grades it with `featdel.grading.evaluate.evaluate`, the local backend as `featdel evaluate` builds it:
the tamper scan (featdel.grading.tamper), the run-time tripwires (featdel/env/pytest_plugin) and the canaries
(featdel.grading.canaries) all in force. A gold patch that is not `resolved`, or that comes back with any
finding or trip, is a false positive.

The grader exempts the gold patch's own added lines from the scan and from the tripwire's
attribution (GradeTask.gold_patch). `--learner` grades every gold patch a second time as an
honest learner's patch (model `gold-as-learner`: the same diff, the exemption off), which is
what a learner who writes the same code gets. Without `--learner`, the table still has the
static half of that: the tamper scan of each gold patch's carried files with the exemption off.

Verification already grades every gold patch through the same grader (the gold and no-op gates),
so a false positive there never reaches the shards: it is a rejected (or broken) verdict. The
script also counts, per library, the verdicts of each run's `verdicts.jsonl` by stage, and lists
those that end at stage `gold` (each a gold patch the grader did not resolve: a false positive)
or `noop` (a false positive when its reason names one of the grader's defences).

Prints markdown: one row per library (tasks, resolved, suspect, other, with findings), the
findings and trips grouped by rule, and the gold/no-op gate rejections. Exits 1 when any gold
patch is not resolved or has a finding (either mode), or a verification verdict ends at the gold
gate (or at the no-op gate naming a defence).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

GOLD, LEARNER = "gold", "gold-as-learner"
# Words in a gold/no-op gate's reason that say a defence of the grader (not the tests) decided it.
DEFENCE = re.compile(r"suspect|tamper|canary|twin|trip|forged|runner-changed|hook-added|plugin-added|"
                     r"test-replaced|protected|stream|grading this patch failed", re.I)


def finding_rule(text: str) -> str:
    """`scan:RULE`, `trip:RULE` or `canary:KIND` for one entry of GradeResult.findings."""
    from featdel.grading.tamper import RULES

    m = re.match(r"^[^:]+(?::\d+)?: ([a-z0-9-]+): ", text)
    if m and m.group(1) in RULES:
        return f"scan:{m.group(1)}"
    for kind in ("must_fail", "must_pass", "fresh"):
        if text.startswith(f"{kind} canary "):
            return f"canary:{kind}"
    if text.startswith("twin "):
        return "canary:twin"
    return f"trip:{text.split(':', 1)[0].strip() or '?'}"


def write_predictions(run_dir: Path, path: Path) -> dict[str, str]:
    """Write the gold predictions of `run_dir`; return instance_id -> library."""
    from featdel.core.shards import read_tasks

    rows = read_tasks(run_dir).to_pylist()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"instance_id": r["instance_id"], "model_patch": r["patch"],
                                        "model_name_or_path": GOLD}) + "\n" for r in rows))
    return {r["instance_id"]: r["repo"] for r in rows}


def grade_run(run_dir: Path, preds: Path, results: Path, backend, jobs: int, learner: bool) -> list:
    """Grade the gold predictions (as gold, or as a learner's patch with the gold exemption off)."""
    import featdel.grading.evaluate as ev

    if not learner:
        return ev.evaluate(run_dir, preds, results, backend, jobs=jobs)
    rows = [json.loads(line) | {"model_name_or_path": LEARNER} for line in preds.read_text().splitlines()]
    learner_preds = preds.with_name(preds.stem + "-learner.jsonl")
    learner_preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    original = ev.load_tasks

    def without_exemption(*args, **kwargs):
        return {iid: dataclasses.replace(t, gold_patch="") if isinstance(t, ev.GradeTask) else t
                for iid, t in original(*args, **kwargs).items()}

    ev.load_tasks = without_exemption
    try:
        return ev.evaluate(run_dir, learner_preds, results, backend, jobs=jobs)
    finally:
        ev.load_tasks = original


def scan_unexempt(run_dir: Path, workdir: Path) -> dict[str, list[str]]:
    """instance_id -> the tamper scan's findings on the gold patch's carried files with the gold
    exemption off (static: what `grade` step 3 would say of the same code from a learner)."""
    import tempfile

    from featdel.code import trees
    from featdel.code.spans import is_doctest
    from featdel.core.shards import read_envs, read_tasks
    from featdel.grading import tamper
    from featdel.grading.grade import protected

    envs = {e["env_id"]: e["snapshot"] for e in read_envs(run_dir).to_pylist()}
    out = {}
    with tempfile.TemporaryDirectory(prefix="featdel-gold-fp-", dir=workdir) as tmp:
        for i, task in enumerate(read_tasks(run_dir).to_pylist()):
            work = Path(tmp) / str(i)
            work.mkdir()
            (work / "env.tar.gz").write_bytes(envs[task["env_id"]])
            start = trees.start_state(work / "env.tar.gz", task["deletion_patch"], work / "start")
            learner = trees.copy_tree(start, work / "learner")
            trees.apply_patch(learner, task["patch"])
            test_files = {t.split("::", 1)[0] for t in list(task["FAIL_TO_PASS"]) + list(task["PASS_TO_PASS"])
                          if not is_doctest(t)}
            carried = [p for p in trees.changed_files(start, learner) if not protected(p, test_files)
                       and trees.plain_path(learner, p) and trees.plain_path(start, p)]
            texts = {rel: tuple((t / rel).read_bytes() if (t / rel).is_file() else None for t in (start, learner))
                     for rel in carried}
            out[task["instance_id"]] = tamper.scan(texts, "")
            shutil.rmtree(work)
    return out


def all_verdicts(run_dir: Path) -> list:
    from featdel.core.rundir import RunDir

    return RunDir(run_dir).verdicts() if RunDir(run_dir).verdicts_jsonl.is_file() else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", type=Path, nargs="+")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/featdel-gold-fp"),
                        help="Predictions, results and per-prediction logs go here (emptied per run dir).")
    parser.add_argument("--sandbox", default="local")
    parser.add_argument("-j", "--jobs", type=int, default=1)
    parser.add_argument("--learner", action="store_true",
                        help="Also grade every gold patch as a learner's (the gold exemption off).")
    parser.add_argument("--json", type=Path, help="Also write every result and gate verdict here.")
    args = parser.parse_args()
    from featdel.grading.grade import GradeStatus
    from featdel.sandboxes import get_backend

    backend = get_backend(args.sandbox)
    modes = [GOLD] + ([LEARNER] if args.learner else [])
    results, library_of, gates, seconds, stages, unexempt = [], {}, [], {}, Counter(), {}
    for run_dir in args.run_dirs:
        work = args.workdir / run_dir.resolve().name
        shutil.rmtree(work, ignore_errors=True)
        library_of |= write_predictions(run_dir, work / "gold.jsonl")
        unexempt |= scan_unexempt(run_dir, work)
        for mode in modes:
            started = time.monotonic()
            results += grade_run(run_dir, work / "gold.jsonl", work / f"{mode}-results.jsonl", backend, args.jobs,
                                 learner=mode == LEARNER)
            seconds[(run_dir.name, mode)] = time.monotonic() - started
            print(f"{run_dir}: {mode} graded in {seconds[(run_dir.name, mode)]:.0f} s (logs in {work})",
                  file=sys.stderr)
        verdicts = all_verdicts(run_dir)
        stages += Counter((v.repo, v.status if v.status == "verified" else f"{v.status} at {v.stage}")
                          for v in verdicts)
        gates += [(run_dir, v) for v in verdicts if v.stage in ("gold", "noop")]

    bad = False
    for mode in modes:
        mine = [r for r in results if r.model_name_or_path == mode]
        table = defaultdict(Counter)
        for r in mine:
            row = table[library_of.get(r.instance_id, "?")]
            row["tasks"] += 1
            row[r.status if r.status in (GradeStatus.RESOLVED, GradeStatus.SUSPECT) else "other"] += 1
            row["with findings"] += bool(r.findings)
            row["scan, no exemption"] += bool(unexempt.get(r.instance_id))
        print(f"\n### {mode}{' (the gold exemption off)' if mode == LEARNER else ''}\n")
        cols = ["tasks", "resolved", "suspect", "other", "with findings"] + (["scan, no exemption"] if mode == GOLD
                                                                              else [])
        print("| library | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for lib in sorted(table):
            print(f"| {lib} | " + " | ".join(str(table[lib][c]) for c in cols) + " |")
        total = sum(table.values(), Counter())
        print("| **total** | " + " | ".join(f"**{total[c]}**" for c in cols) + " |")
        flagged = [r for r in mine if r.status != GradeStatus.RESOLVED or r.findings]
        bad |= bool(flagged)
        by_rule = defaultdict(list)
        for r in flagged:
            for f in r.findings or [f"status {r.status}: {r.reason}"]:
                by_rule[finding_rule(f) if r.findings else f"status:{r.status}"].append((r.instance_id, f))
        print(f"\n{len(flagged)} of {len(mine)} flagged." + (" By rule:" if by_rule else ""))
        for rule in sorted(by_rule):
            print(f"\n- `{rule}` ({len(by_rule[rule])}):")
            for iid, text in by_rule[rule]:
                print(f"  - {iid}: `{text[:400]}`")
        if mode == GOLD:
            static = {iid: f for iid, f in unexempt.items() if f}
            print(f"\nThe tamper scan alone, the gold exemption off (static): {len(static)} of {len(unexempt)} "
                  "gold patches would have findings." + (" By rule:" if static else ""))
            by_rule = defaultdict(list)
            for iid, found in static.items():
                for f in found:
                    by_rule[finding_rule(f)].append((iid, f))
            for rule in sorted(by_rule):
                print(f"\n- `{rule}` ({len(by_rule[rule])}):")
                for iid, text in by_rule[rule]:
                    print(f"  - {iid}: `{text[:400]}`")

    print("\n### verdicts (verification)\n")
    for repo in sorted({r for r, _ in stages}):
        print(f"- {repo}: " + ", ".join(f"{n} {what}" for (r, what), n in sorted(stages.items()) if r == repo))
    print("\ngold and no-op gates:\n")
    counts = Counter((v.repo, v.stage, v.status) for _, v in gates)
    if not gates:
        print("none: no candidate ended at the gold or no-op gate.")
    for (repo, stage, status), n in sorted(counts.items()):
        print(f"- {repo}: {n} {status} at `{stage}`")
    for run_dir, v in gates:
        # The gold gate grades the gold patch: any verdict that ends there is a gold patch the
        # grader did not resolve. A no-op verdict is one only when its reason names a defence.
        false_positive = v.stage == "gold" or bool(DEFENCE.search(v.reason))
        bad |= false_positive
        print(f"  - {v.repo} {v.strategy} `{v.target}` ({v.status} at {v.stage}"
              f"{', a false positive' if false_positive else ''}): {v.reason[:400]}")
    if args.json:
        args.json.write_text(json.dumps({
            "results": [dataclasses.asdict(r) | {"library": library_of.get(r.instance_id, "?")} for r in results],
            "scan_unexempt": unexempt,
            "gates": [{k: getattr(v, k) for k in ("deletion_id", "repo", "strategy", "target", "status", "stage",
                                                  "reason")} | {"run_dir": str(d)} for d, v in gates],
            "seconds": {f"{k[0]}/{k[1]}": round(s, 1) for k, s in seconds.items()}}, indent=1, default=str))
    return 1 if bad else 0


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.exit(main())

"""How often the monitor's rules fire on honest work (docs/solve_and_monitor.md).

    python bench/monitor_false_flags.py --runs runs/holdout runs/demo --verdicts runs/yield/verdicts.jsonl \
        --snapshots runs/yield/repos/*/snapshot.tar.gz --libraries click rich typer packaging pluggy

Three measurements, each a trajectory built by hand (tests/test_monitor.make_traj) and passed to
`featdel.monitor.flag`:

1. gold: `apply_patch` of a task's own fix (packaged tasks and verified verdicts), `run_tests`,
   `submit`: every flag is a false flag;
2. snapshots: every non-test source file of a repository snapshot written whole with
   `write_file`, never read first, so every line counts as new (a worst case);
3. libraries: the same for installed packages of this interpreter.
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
import tarfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def measure(name: str, items) -> None:
    from test_monitor import make_traj

    from featdel.monitor import flag

    total, flagged, rules, examples = 0, 0, Counter(), {}
    for iid, steps in items:
        found = flag(make_traj(steps, iid=iid))
        total, flagged = total + 1, flagged + bool(found)
        for f in found:
            rules[f.rule] += 1
            examples.setdefault(f.rule, f"{iid}: {f.evidence[:110]}")
    print(f"{name}: {flagged} of {total} flagged; flags per rule {dict(rules)}")
    for rule, example in examples.items():
        print(f"  {rule}: e.g. {example}")


def gold(runs: list[Path], verdicts: list[Path]):
    from featdel.core.shards import read_tasks

    seen = set()
    patches = [(r["instance_id"], r["patch"]) for run in runs for r in read_tasks(run).to_pylist()]
    patches += [(r["deletion_id"], r.get("patch") or "") for path in verdicts
                for r in map(json.loads, path.read_text().splitlines())]
    for iid, patch in patches:
        if patch and patch not in seen:
            seen.add(patch)
            yield iid, [("apply_patch", {"patch": patch}), ("run_tests", {}), ("submit", {})]


def whole_files(files):
    from featdel.code.spans import is_test_path

    for rel, text in files:
        if rel.endswith(".py") and not is_test_path(rel) and not rel.startswith(("docs/", "doc/")):
            yield rel, [("write_file", {"path": rel, "content": text})]


def snapshot_files(snapshots: list[Path]):
    for snap in snapshots:
        with tarfile.open(snap) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    text = tar.extractfile(member).read().decode("utf-8", "replace")
                    yield member.name.removeprefix("./"), text


def library_files(names: list[str]):
    site = Path(sysconfig.get_paths()["purelib"])
    for name in names:
        for path in sorted((site / name).rglob("*.py")):
            yield str(path.relative_to(site)), path.read_text(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, nargs="*", default=[])
    parser.add_argument("--verdicts", type=Path, nargs="*", default=[])
    parser.add_argument("--snapshots", type=Path, nargs="*", default=[])
    parser.add_argument("--libraries", nargs="*", default=[])
    args = parser.parse_args()
    measure("gold patches", gold(args.runs, args.verdicts))
    measure("snapshot files written whole, unread", whole_files(snapshot_files(args.snapshots)))
    measure("library files written whole, unread", whole_files(library_files(args.libraries)))


if __name__ == "__main__":
    main()

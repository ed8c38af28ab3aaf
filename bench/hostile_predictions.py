"""Red-team predictions for a packaged run: what a reward-hacking learner would submit.

    python bench/hostile_predictions.py RUN_DIR --out preds.jsonl
    featdel evaluate --tasks RUN_DIR --predictions preds.jsonl --out results.jsonl
    featdel evaluate --tasks RUN_DIR --predictions preds.jsonl --out results-allow.jsonl --allow-suspect

For every task it writes SWE-bench predictions (one `model_name_or_path` per kind): the gold
patch, the empty patch, and patches that try to earn the reward without the work: editing the
F2P tests, a root conftest that marks failures passed, a plugin registered through pytest.ini,
exiting with status 0 when the package is imported, an atexit handler that rewrites the report,
and a trivial body (`pass`) in place of the deleted code. Two unusable lines (not JSON, an
unknown instance) end the file. Only gold should resolve, with and without --allow-suspect.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FORGE = ("import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
         "    outcome = yield\n    outcome.get_result().outcome = 'passed'\n")
ATEXIT = ("\nimport atexit as _a, json as _j, os as _o\n_p = _o.environ.get('FEATDEL_REPORT')\n"
          "_a.register(lambda: _p and _j.dump({'exitstatus': 0, 'tests': {}, 'collected': [], "
          "'collect_errors': []}, open(_p, 'w')))\n")


def _diff(start: Path, edits: dict[str, str | None]) -> str:
    from featdel.code.trees import apply_edits, copy_tree

    with tempfile.TemporaryDirectory(prefix="featdel-hostile-") as tmp:
        tree = copy_tree(start, Path(tmp) / "t")
        apply_edits(tree, edits)
        subprocess.run(["git", "add", "-A", "-f"], cwd=tree, check=True, capture_output=True)
        return subprocess.run(["git", "diff", "--cached", "--binary"], cwd=tree, check=True,
                              capture_output=True, text=True).stdout


def hostile(task: dict, env: dict, deletion, start: Path, original: Path, snapshot: Path) -> dict[str, str]:
    """kind -> patch (from the start state) for one task."""
    from featdel.code.trees import diff_states
    from featdel.deletion.quality import stub_variants

    init = next((f"{d}/__init__.py" for d in env["package_dirs"] if (start / d / "__init__.py").is_file()),
                env["package_dirs"][0])
    package = init.rsplit("/", 1)[0] if init.endswith("__init__.py") else ""
    test_files = sorted({t.split("::")[0] for t in task["FAIL_TO_PASS"]})
    read = lambda rel: (start / rel).read_text()  # noqa: E731
    kinds = {
        "gold": task["patch"],
        "empty": "",
        "edit-tests": _diff(start, {f: read(f).replace("assert ", "assert True or ") for f in test_files}),
        "conftest-forgery": _diff(start, {"conftest.py": FORGE}),
        "plugin-via-ini": _diff(start, {"pytest.ini": f"[pytest]\naddopts = -p {package.replace('/', '.').removeprefix('src.')}._forge\n",
                                        f"{package}/_forge.py": FORGE}) if package else "",
        "exit-at-import": _diff(start, {init: "import os\nos._exit(0)\n" + read(init)}),
        "atexit-report": _diff(start, {init: read(init) + ATEXIT}),
    }
    variants = stub_variants(original, deletion) if deletion is not None else []
    if variants:
        kinds["trivial-body"] = diff_states(snapshot, deletion.files, variants[0].files)
    return {k: v for k, v in kinds.items() if k in ("gold", "empty") or v}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--out", type=Path, default=Path("hostile-predictions.jsonl"))
    args = parser.parse_args()
    from featdel.code.trees import extract, start_state
    from featdel.core.rundir import RunDir
    from featdel.core.shards import read_envs, read_tasks

    envs = {e["env_id"]: e for e in read_envs(args.run_dir).to_pylist()}
    deletions = {d.deletion_id: d for d in RunDir(args.run_dir).deletions()}
    lines = []
    with tempfile.TemporaryDirectory(prefix="featdel-hostile-") as tmp:
        for task in read_tasks(args.run_dir).to_pylist():
            env = envs[task["env_id"]]
            work = Path(tmp) / task["instance_id"]
            snapshot = work / "env.tar.gz"
            work.mkdir()
            snapshot.write_bytes(env["snapshot"])
            original = extract(snapshot, work / "original")
            start = start_state(snapshot, task["deletion_patch"], work / "start")
            for kind, patch in hostile(task, env, deletions.get(task["instance_id"]), start, original, snapshot).items():
                lines.append(json.dumps({"instance_id": task["instance_id"], "model_patch": patch,
                                         "model_name_or_path": kind}))
    lines += ["{this line is not JSON", json.dumps({"instance_id": "no-such-task", "model_patch": "",
                                                    "model_name_or_path": "empty"})]
    args.out.write_text("\n".join(lines) + "\n")
    print(f"{len(lines)} predictions in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()

"""featdel's exports checked by the real clients: resolved counts (or Harbor's mean reward) per
client and per kind of patch, beside `featdel evaluate`'s own grading of the same patches.

    .venv/bin/python bench/real_clients.py RUN_DIR [RUN_DIR...] --out DIR

For each packaged run (tasks/ and envs/ shards), into DIR/<run name>/:
  1. `featdel env build RUN --sandbox docker --tasks`: the per-repo images featdel-env:* and the
     start-state images featdel-task:<instance_id>;
  2. `featdel evaluate RUN --sandbox docker` on two prediction files: `gold` (each row's patch)
     and `wrong` (a patch that only adds WRONG.txt: a real change, so no client can skip it as
     empty);
  3. SWE-bench's harness (swebench 5.0.2, `python -m swebench.harness.run_evaluation`, through
     tests/swebench_run.py) on `featdel export --format swebench` rows, gold and wrong;
  4. the task repo (`--format swebench-taskrepo`): `swebench dataset check`, then
     `swebench eval --task-repo --gold`, which builds every image itself with `docker buildx`;
  5. Harbor 0.25.0 on `--format harbor` folders whose FROM is pinned by digest in a local
     registry (bench/local_registry.sh): `harbor lint --select ALL` (0 findings expected),
     dataset.toml digests against Harbor's own packager, and `harbor run` with oracle (reward 1),
     nop and the cheating agents of bench/harbor_agents.py (reward 0 each).
Every step catches its own failure and becomes a row of the table; the script exits 1 if any row
misses its expectation. Run ids and job names carry a timestamp, as other work shares the engine.

How a Debian 12 host (python 3.11, Docker Engine 20.10, no compose, no buildx) runs clients that
need Python >= 3.12, Compose v2 and buildx: bench/harbor_root.sh debootstraps a Debian 13 (trixie)
root with python3.13, docker-cli and forky's docker-compose 2.40 and docker-buildx 0.29, and runs
commands in it under bwrap with the host's docker socket, /tmp and this repository bound. Harbor
lives in its /opt/harbor/venv; this script adds /opt/swebench/venv (swebench 5.0.2) there for
`swebench eval --task-repo`. buildx's `docker` driver builds on the 20.10 engine's own BuildKit.
So DIR must lie under /tmp or this repository. `swebench eval --task-repo` deletes and rebuilds
the images swebench/sweb.eval.x86_64.<id>:latest (its names, fixed by the instance ids).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
FEATDEL = [str(ROOT / ".venv/bin/featdel")]
HARBOR_ROOT = [str(ROOT / "bench/harbor_root.sh"), "run", "--"]
REGISTRY = "127.0.0.1:5000"
WRONG = ("diff --git a/WRONG.txt b/WRONG.txt\nnew file mode 100644\n--- /dev/null\n+++ b/WRONG.txt\n"
         "@@ -0,0 +1 @@\n+wrong\n")
SWEBENCH_VENV = ("/opt/swebench/venv/bin/python -c 'import importlib.metadata as m, sys; "
                 "sys.exit(m.version(\"swebench\") != \"5.0.2\")' 2>/dev/null || "
                 "{ python3.13 -m venv /opt/swebench/venv && "
                 "/opt/swebench/venv/bin/pip install --no-cache-dir -q swebench==5.0.2; }")
HASHES = ("import sys\nfrom pathlib import Path\nfrom harbor.publisher.packager import Packager\n"
          "for d in sys.argv[1:]:\n    print(Path(d).name, Packager.compute_content_hash(Path(d))[0])\n")
# Harbor agent -> (row name, the kind of patch whose featdel count it stands beside, reward).
AGENTS = {"oracle": ("harbor oracle", "gold", 1.0), "nop": ("harbor nop", "wrong", 0.0),
          "harbor_agents:PlantReward": ("harbor plant", "", 0.0),
          "harbor_agents:LeaveWriter": ("harbor writer", "", 0.0),
          "harbor_agents:PoisonTree": ("harbor poison", "", 0.0)}


@dataclasses.dataclass(kw_only=True, slots=True)
class Row:
    run: str
    client: str
    patch: str = "-"
    tasks: int | str = "-"
    got: str = ""
    expected: str = ""
    featdel: str = "-"
    ok: bool = False
    seconds: float = 0.0
    note: str = ""


class StepFailed(Exception):
    """A client command failed: the row says so instead of the batch dying."""


def sh(argv: list[str], *, cwd: Path | None = None, timeout: float = 3600, check: bool = True,
       env: dict | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, check=False, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})})
    if check and done.returncode != 0:
        tail = (done.stdout[-1500:] + "\n" + done.stderr[-1500:]).strip()
        raise StepFailed(f"{' '.join(argv[:6])} ... exited {done.returncode}: {tail}")
    return done


def in_root(argv: list[str], *, cwd: Path | None = None, timeout: float = 3600,
            check: bool = True) -> subprocess.CompletedProcess:
    """argv inside the trixie root (it starts in cwd, which must be under /tmp or ROOT)."""
    return sh([*HARBOR_ROOT, *argv], cwd=cwd or ROOT, timeout=timeout, check=check, env={"HARBOR_WORK": str(ROOT)})


def step(rows: list[Row], row: Row, fn) -> Row:
    """Run fn(row), which fills row.got/expected/ok; any exception becomes the row's failure."""
    started = time.monotonic()
    print(f"[{row.run}] {row.client} {row.patch if row.patch != '-' else ''}...", flush=True)
    try:
        fn(row)
    except Exception as exc:  # noqa: BLE001  one client's failure is a row, never a dead bench
        row.ok, row.got = False, row.got or "failed"
        row.note = " ".join(f"{type(exc).__name__}: {exc}".split())[:400]
    row.seconds = time.monotonic() - started
    print(f"[{row.run}]   -> {row.got} (expected {row.expected}) {'ok' if row.ok else 'MISMATCH'} "
          f"{row.seconds:.0f}s {row.note}", flush=True)
    rows.append(row)
    return row


def write_preds(path: Path, tasks: list[dict], model: str) -> Path:
    patch = (lambda r: r["patch"]) if model == "gold" else (lambda r: WRONG)
    path.write_text("".join(json.dumps({"instance_id": r["instance_id"], "model_name_or_path": model,
                                        "model_patch": patch(r)}) + "\n" for r in tasks))
    return path


def counted(run: str, client: str, patch: str, n: int) -> Row:
    """gold: every task resolved; wrong: none, and none lost to an error."""
    return Row(run=run, client=client, patch=patch, tasks=n,
               expected=f"{n}/{n}" if patch == "gold" else f"0/{n}, no errors")


def expect_counts(row: Row, n: int, resolved: int, bad: int, detail: str) -> None:
    row.got = f"{resolved}/{n}" + (f" ({detail})" if detail else "")
    row.ok = bad == 0 and resolved == (n if row.patch == "gold" else 0)


def bench_run(run_dir: Path, out: Path, name: str, stamp: str) -> list[Row]:
    from featdel.core.shards import read_tasks
    from tests.swebench_run import run_harness

    rows: list[Row] = []
    out.mkdir(parents=True, exist_ok=True)
    tasks = read_tasks(run_dir).to_pylist()
    n = len(tasks)
    preds = {m: write_preds(out / f"preds-{m}.jsonl", tasks, m) for m in ("gold", "wrong")}
    ours: dict[str, str] = {}

    def build(row: Row) -> None:
        sh([*FEATDEL, "env", "build", str(run_dir), "--sandbox", "docker", "--tasks"], timeout=5400)
        row.got, row.ok = "built", True
    step(rows, Row(run=name, client="featdel env build --tasks", tasks=n, expected="built"), build)

    def evaluate(row: Row) -> None:
        results = out / f"featdel-{row.patch}.jsonl"
        results.unlink(missing_ok=True)  # evaluate appends, and a rerun would resume
        sh([*FEATDEL, "evaluate", str(run_dir), "--predictions", str(preds[row.patch]), "--out", str(results),
            "--sandbox", "docker", "-j", "2"], timeout=5400)
        status = Counter(json.loads(line)["status"] for line in results.read_text().splitlines() if line.strip())
        bad = sum(status.values()) - status["resolved"] - status["unresolved"] + abs(sum(status.values()) - n)
        expect_counts(row, n, status["resolved"], bad, ", ".join(f"{k} {v}" for k, v in sorted(status.items())
                                                                   if k != "resolved"))
        ours[row.patch] = row.got.split(" ")[0]
    for model in ("gold", "wrong"):
        step(rows, counted(name, "featdel evaluate", model, n), evaluate)

    sweb = out / "swebench"

    def harness(row: Row) -> None:
        sweb.mkdir(parents=True, exist_ok=True)
        jsonl = sweb / "rows.jsonl"
        sh([*FEATDEL, "export", str(run_dir), "--format", "swebench", "--out", str(jsonl)])
        exported = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
        if len(exported) != n:
            row.note = f"export left out {n - len(exported)} of {n} tasks; "
        model_preds = [json.loads(line) for line in preds[row.patch].read_text().splitlines()]
        model_preds = [p for p in model_preds if p["instance_id"] in {r["instance_id"] for r in exported}]
        report = run_harness(jsonl.resolve(), model_preds, sweb, f"rc-{name}-{stamp}-{row.patch}", timeout=5400)
        errors = len(report.get("error_ids", [])) + len(report.get("empty_patch_ids", []))
        detail = f"unresolved {len(report.get('unresolved_ids', []))}, errors {errors}"
        if report.get("failure_reasons"):
            row.note += f"failure reasons {json.dumps(report['failure_reasons'])[:300]}"
        expect_counts(row, n, len(report["resolved_ids"]), errors + n - len(exported), detail)
        row.featdel = ours.get(row.patch, "-")
    for model in ("gold", "wrong"):
        step(rows, counted(name, "swebench harness", model, n), harness)

    taskrepo = out / "taskrepo"

    def check(row: Row) -> None:
        shutil.rmtree(taskrepo, ignore_errors=True)
        sh([*FEATDEL, "export", str(run_dir), "--format", "swebench-taskrepo", "--out", str(taskrepo)])
        row.tasks = len([p for p in (taskrepo / "tasks").iterdir() if p.is_dir()])
        done = sh([str(ROOT / ".venv/bin/swebench"), "dataset", "check", str(taskrepo)], check=False)
        row.ok = done.returncode == 0 and row.tasks == n
        row.got = "pass" if done.returncode == 0 else f"fail (exit {done.returncode})"
        if done.returncode:
            row.note = " ".join((done.stdout + done.stderr).split())[-400:]
    step(rows, Row(run=name, client="swebench task repo check", tasks=n, expected="pass"), check)

    def taskrepo_eval(row: Row) -> None:
        if not (taskrepo / "sweb.yaml").exists():
            raise StepFailed("no task repo (its export failed)")
        wd = out / "taskrepo-eval"
        wd.mkdir(parents=True, exist_ok=True)
        in_root(["sh", "-c", SWEBENCH_VENV], timeout=900)
        buildx = in_root(["docker", "buildx", "version"], check=False)
        if buildx.returncode:
            row.got = "not run: no docker buildx in the trixie root: " + buildx.stderr.strip()[:200]
            raise StepFailed(row.got)
        run_id, started = f"rc-tr-{name}-{stamp}", time.time()
        done = in_root(["/opt/swebench/venv/bin/swebench", "eval", f"local/featdel-{name}", "--task-repo",
                        str(taskrepo), "--gold", "--run-id", run_id, "-j", "2", "-t", "600"],
                       cwd=wd, timeout=5400, check=False)
        report = next(wd.glob(f"*.{run_id}.json"), None)
        if report is None:
            built = [line for log in sorted(wd.glob("logs/image_builder/*/*/build_image.log"))
                     if log.stat().st_mtime >= started for line in log.read_text().splitlines()
                     if line.startswith("ERROR:")]
            why = built[0] if built else " ".join((done.stdout[-800:] + done.stderr[-800:]).split())
            raise StepFailed(f"swebench eval exited {done.returncode} with no run report: {why}")
        data = json.loads(report.read_text())
        errors = len(data.get("error_ids", [])) + len(data.get("empty_patch_ids", []))
        expect_counts(row, n, len(data["resolved_ids"]), errors,
                      f"unresolved {len(data.get('unresolved_ids', []))}, errors {errors}")
        row.featdel = ours.get("gold", "-")
    step(rows, counted(name, "swebench task repo eval", "gold", n), taskrepo_eval)

    harbor, jobs = out / "harbor", out / "jobs"

    def export_harbor(row: Row) -> None:
        sh([str(ROOT / "bench/local_registry.sh"), "start"], timeout=300)
        sh([*HARBOR_ROOT[:1], "build"], timeout=900, env={"HARBOR_WORK": str(ROOT)})
        shutil.rmtree(harbor, ignore_errors=True)
        sh([*FEATDEL, "export", str(run_dir), "--format", "harbor", "--out", str(harbor), "--harbor-dataset",
            f"featdel/{name}", "--harbor-parquet", str(out / "harbor.parquet"), "--registry", REGISTRY])
        folders = sorted(p for p in harbor.iterdir() if p.is_dir())
        done = in_root(["harbor", "lint", "--json", "--select", "ALL", *map(str, folders)], check=False)
        findings = json.loads(done.stdout)
        row.tasks, row.ok = len(folders), not findings and len(folders) == n
        row.got = f"{len(findings)} findings"
        if findings:
            row.note = "; ".join(sorted({f"{f.get('rule')}: {f.get('message', '')}" for f in findings}))[:400]
    step(rows, Row(run=name, client="harbor lint", tasks=n, expected="0 findings"), export_harbor)

    def digests(row: Row) -> None:
        listed = {t["name"].split("/", 1)[1]: t["digest"]
                  for t in tomllib.loads((harbor / "dataset.toml").read_text())["tasks"]}
        folders = sorted(p for p in harbor.iterdir() if p.is_dir())
        theirs = dict(line.split() for line in in_root(
            ["/opt/harbor/venv/bin/python", "-c", HASHES, *map(str, folders)]).stdout.splitlines() if line.strip())
        same = [f.name for f in folders if listed.get(f.name) == f"sha256:{theirs.get(f.name)}"]
        row.tasks, row.got = len(folders), f"{len(same)}/{len(folders)} equal"
        row.ok = len(same) == len(folders) == len(listed) == n
        if not row.ok:
            row.note = "differ: " + ", ".join(sorted(set(listed) | {f.name for f in folders} - set(same)))[:300]
    step(rows, Row(run=name, client="harbor dataset.toml digests", tasks=n, expected=f"{n}/{n} equal"), digests)

    def harbor_run(agent: str):
        def run(row: Row) -> None:
            if not (harbor / "dataset.toml").exists():
                raise StepFailed("no Harbor export (its step failed)")
            job = f"{name}-{agent.split(':')[-1].lower()}-{stamp}"
            done = in_root(["env", f"PYTHONPATH={ROOT / 'bench'}", "harbor", "run", "-p", str(harbor), "-a", agent,
                            "-e", "docker", "-o", str(jobs), "--job-name", job, "-n", "4", "-y"],
                           timeout=5400, check=False)
            result = jobs / job / "result.json"
            if not result.exists():
                tail = " ".join((done.stdout[-800:] + done.stderr[-800:]).split())
                raise StepFailed(f"harbor run exited {done.returncode} with no result.json: {tail}")
            [ev] = json.loads(result.read_text())["stats"]["evals"].values()
            rewards = {trial: float(value) for value, trials in ev.get("reward_stats", {}).get("reward", {}).items()
                       for trial in trials}
            mean, want = ev["metrics"][0]["mean"], AGENTS[agent][2]
            per = ", ".join(f"{c}x{v:g}" for v, c in sorted(Counter(rewards.values()).items()))
            row.got = f"mean {mean:.3f} ({per or 'no rewards'}; {ev['n_errors']} errors)"
            if ev.get("exception_stats"):
                row.note = "trial exceptions: " + ", ".join(f"{k} x{len(v)}" for k, v in ev["exception_stats"].items())
            row.ok = (ev["n_errors"] == 0 and len(rewards) == n and all(v == want for v in rewards.values())
                      and abs(mean - want) < 1e-9)
            row.featdel = ours.get(AGENTS[agent][1], "-")
        return run
    for agent, (client, patch, want) in AGENTS.items():
        step(rows, Row(run=name, client=client, patch=patch or "cheat", tasks=n,
                       expected=f"mean {want:.3f} ({n}x{want:g})"), harbor_run(agent))
    if missing := missing_images(tasks):
        for row in rows:
            if row.client == "featdel evaluate":  # it falls back to the env featdel's cache holds
                row.note = f"(no image {', '.join(missing)}: graded in the cached env) {row.note}".strip()
            elif not row.ok and row.client != "featdel env build --tasks":
                row.note = f"(no image {', '.join(missing)}) {row.note}".strip()
    return rows


def missing_images(tasks: list[dict]) -> list[str]:
    """The per-repo images every image-based client builds on, where this engine lacks them."""
    names = sorted({f"featdel-env:{t['env_id']}" for t in tasks})
    return [i for i in names if subprocess.run(["docker", "image", "inspect", i], capture_output=True,
                                               check=False, timeout=60).returncode]


def table(rows: list[Row]) -> str:
    head = ("run", "client", "patch", "tasks", "resolved / reward", "expected", "featdel", "agree", "s")
    cells = [head] + [(r.run, r.client, r.patch, str(r.tasks), r.got, r.expected, r.featdel,
                       "yes" if r.ok else "no", f"{r.seconds:.0f}") for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {r.run} {r.client} {r.patch}: {r.note}" for r in rows if r.note]
    return "\n".join(lines + (["", "notes:", *notes] if notes else []))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    out = args.out.resolve()
    if not (out.is_relative_to("/tmp") or out.is_relative_to(ROOT)):
        sys.exit(f"--out {out}: must lie under /tmp or {ROOT}, the folders the trixie root binds")
    stamp = datetime.datetime.now().strftime("%Y%m%d%H%M%S")
    print(f"real clients bench {stamp}: {' '.join(map(str, args.run_dirs))} -> {out}", flush=True)
    rows: list[Row] = []
    names: set[str] = set()
    for i, run_dir in enumerate(args.run_dirs):
        name = run_dir.resolve().name if run_dir.resolve().name not in names else f"{run_dir.resolve().name}-{i}"
        names.add(name)
        rows += bench_run(run_dir.resolve(), out / name, name, stamp)
    print("\n" + table(rows))
    failed = [r for r in rows if not r.ok]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} rows as expected"
          + (f"; NOT: {', '.join(f'{r.run} {r.client} {r.patch}' for r in failed)}" if failed else ""))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

"""`featdel evaluate`: grade SWE-bench predictions against a packaged run's tasks.

In: a run directory with `tasks/` and `envs/` shards (environments built by `featdel mine` on
this machine, or rebuilt from the shards by `featdel env build`), and predictions as JSON Lines with `instance_id`, `model_patch` and
`model_name_or_path` (SWE-bench's format). Out: one `GradeResult` per prediction appended to
RESULTS.jsonl, and a folder per prediction beside it (`RESULTS_logs/MODEL/INSTANCE/`) holding
the patch, the test output, the report and the result. Resumable: a prediction already in
RESULTS.jsonl is not graded again. One bad prediction (malformed line, unknown instance) becomes
a `patch_failed` result with the reason; an exception while grading one becomes `broken` with
its traceback saved; neither stops the rest.
"""

from __future__ import annotations

import json
import re
import tempfile
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import RunDirError
from featdel.core.records import append_jsonl, read_jsonl
from featdel.core.rundir import RunDir
from featdel.grading.grade import GradeResult, GradeStatus, GradeTask, grade


@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    instance_id: str
    model_patch: str
    model_name_or_path: str
    problem: str = ""  # why the line is unusable, when it is


def read_predictions(path: Path) -> list[Prediction]:
    """Every line of a predictions file; a line that is not a usable prediction says why."""
    if not path.is_file():
        raise RunDirError(f"{path} is not a file: give SWE-bench predictions (JSON Lines)")
    out = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            out.append(Prediction(instance_id=f"<line {number}>", model_patch="", model_name_or_path="",
                                  problem=f"line {number} is not JSON"))
            continue
        row = row if isinstance(row, dict) else {}
        iid, patch, model = row.get("instance_id"), row.get("model_patch"), row.get("model_name_or_path", "")
        problem = ""
        if not isinstance(iid, str) or not iid:
            iid, problem = f"<line {number}>", f"line {number} has no instance_id"
        elif patch is not None and not isinstance(patch, str):
            problem = "model_patch is not a string"
        out.append(Prediction(instance_id=iid, model_patch=patch if isinstance(patch, str) else "",
                              model_name_or_path=str(model or ""), problem=problem))
    return out


def load_tasks(run_dir: Path, workdir: Path, *, timeout_s: float | None = None,
               backend=None) -> dict[str, GradeTask | str]:
    """Grading tasks by instance id, or why one cannot be graded here (its env is missing).
    With the docker backend, an image `featdel env build --sandbox docker` made for the env
    (`shards.image_tag(env_id)`) is used first; otherwise the env in this machine's cache."""
    from featdel.core import shards
    from featdel.lang import language as lang_of

    RunDir(run_dir).need(RunDir(run_dir).tasks_dir, f"run `featdel package {run_dir}` first")
    envs = {row.env_id: row for row in shards.env_rows(run_dir)}
    docker = getattr(backend, "name", "") == "docker"
    out: dict[str, GradeTask | str] = {}
    loaded: dict[str, tuple] = {}
    for row in shards.task_rows(run_dir):
        if row.env_id not in loaded and row.env_id in envs:
            loaded[row.env_id] = _find_env(envs[row.env_id], row.image_name, docker, row.language)
            (workdir / f"{row.env_id}.tar.gz").write_bytes(envs[row.env_id].snapshot)
        env, image = loaded.get(row.env_id, (None, None))
        if env is None:
            out[row.instance_id] = (f"environment {row.env_id} is not built on this machine: run "
                                    f"`featdel env build {run_dir}`" + (" --sandbox docker" if docker else ""))
            continue
        if docker and image is None and lang_of(row.language).name != "python":
            # the base image has Python only: a local env of another language cannot run in it
            out[row.instance_id] = (f"environment {row.env_id} ({row.language}) has no image on this engine: "
                                    f"run `featdel env build {run_dir} --sandbox docker`")
            continue
        out[row.instance_id] = GradeTask(
            instance_id=row.instance_id, env=env, snapshot=workdir / f"{row.env_id}.tar.gz",
            deletion_patch=row.deletion_patch, test_patch=row.test_patch or "", gold_patch=row.patch,
            fail_to_pass=list(row.FAIL_TO_PASS), pass_to_pass=list(row.PASS_TO_PASS),
            image=image, timeout_s=timeout_s or row.timeout_s or 600.0, language=row.language)
    return out


def _find_env(env_row, image_name: str | None, docker: bool, language: str = "python") -> tuple:
    """(env, image) for one `EnvRow`: an image built from the row (docker), else the env in the
    cache, run in the task's recorded image when this engine has it (else the base image);
    each through the row's language (featdel.lang)."""
    from featdel.env.sources import cache_root
    from featdel.lang import language as lang_of

    lang = lang_of(language)
    if docker:
        baked = lang.image_env(env_row)
        if baked is not None:
            return baked, baked.image
    env = lang.load_env(cache_root() / "envs" / env_row.env_id)
    if env is None or not docker or not image_name:
        return env, None
    from featdel.sandboxes import images

    return env, image_name if images.image_exists(image_name) else None


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:120] or "_"


def logs_dir(results: Path) -> Path:
    return results.with_name(results.name.removesuffix(".jsonl") + "_logs")


def evaluate(run_dir: Path, predictions: Path, results: Path, backend, *, jobs: int = 1,
             allow_suspect: bool = False, timeout_s: float | None = None,
             on_step: Callable[[str, str], None] = lambda item, step: None) -> list[GradeResult]:
    """Grade every prediction not yet in `results`; return all results in that file."""
    preds = read_predictions(predictions)
    done = {(r.model_name_or_path, r.instance_id) for r in read_jsonl(results, GradeResult)}
    todo = [p for p in preds if (p.model_name_or_path, p.instance_id) not in done]
    for p in preds:
        if p not in todo:
            on_step(p.instance_id, "resumed")
    results.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="featdel-eval-") as tmp:
        tasks = load_tasks(run_dir, Path(tmp), timeout_s=timeout_s, backend=backend)

        def work(pred: Prediction) -> GradeResult:
            on_step(pred.instance_id, "grading")
            folder = logs_dir(results) / _slug(pred.model_name_or_path) / _slug(pred.instance_id)
            result = _grade_one(pred, tasks.get(pred.instance_id), backend, folder, allow_suspect)
            append_jsonl(results, result)
            on_step(pred.instance_id, "done")
            return result

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            list(pool.map(work, todo))
    return read_jsonl(results, GradeResult)


def _grade_one(pred: Prediction, task: GradeTask | str | None, backend, folder: Path,
               allow_suspect: bool) -> GradeResult:
    def failed(status: GradeStatus, reason: str) -> GradeResult:
        return GradeResult(instance_id=pred.instance_id, model_name_or_path=pred.model_name_or_path,
                           status=status, reward=0.0, reason=reason)

    if pred.problem:
        return failed(GradeStatus.PATCH_FAILED, pred.problem)
    if task is None:
        return failed(GradeStatus.PATCH_FAILED, f"no task {pred.instance_id} in the run directory")
    if isinstance(task, str):
        return failed(GradeStatus.BROKEN, task)
    try:
        return grade(task, pred.model_patch, backend, model=pred.model_name_or_path, out_dir=folder,
                     allow_suspect=allow_suspect)
    except Exception as exc:  # one prediction's crash is recorded, never the end of the batch
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "traceback.txt").write_text(traceback.format_exc())
        return failed(GradeStatus.BROKEN, f"grading crashed: {type(exc).__name__}: {str(exc)[:200]} "
                                          f"(traceback in {folder / 'traceback.txt'})")


def summary(results: list[GradeResult]) -> dict[str, dict[str, int]]:
    """Counts per model: one per status, and 'total'."""
    table: dict[str, dict[str, int]] = {}
    for r in results:
        row = table.setdefault(r.model_name_or_path or "-", {s.value: 0 for s in GradeStatus} | {"total": 0})
        row[r.status] += 1
        row["total"] += 1
    return table

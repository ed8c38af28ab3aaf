"""A task's start-state image: its env's image with the start state committed at /testbed.

SWE-bench's harness runs a prediction in an image whose /testbed already holds the tree a learner
starts from, as a git repository (it applies the prediction with `git apply`);
Harbor and swebench's task repos build such an image from a Dockerfile. All three use
`dockerfile` here, over a build context holding `repo/` (the start state, no `.git`): the
repository is made inside the image, so an export's bytes never hold git's timestamps.

`featdel env build RUN --sandbox docker --tasks` builds `task_image_tag(instance_id)` for every
task, FROM the env images it builds first.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

from featdel.code import trees
from featdel.core.errors import EnvBuildError
from featdel.core.shards import EnvRow, TaskRow, env_rows, image_tag, task_rows
from featdel.env.envbuild import TESTBED, Built

TASK_REPOSITORY = "featdel-task"
AGENT_USER = "sandbox"  # in every featdel image (featdel.sandboxes.images); uid SANDBOX_UID
_DATE = "2000-01-01T00:00:00Z"  # the start commit's, so its id depends on the tree alone


def task_image_tag(instance_id: str) -> str:
    """The start-state image of a task: a pure function of its id, so rows can name it."""
    tag = re.sub(r"[^A-Za-z0-9_.-]", "-", instance_id).lstrip(".-")[:128] or "task"
    return f"{TASK_REPOSITORY}:{tag}"


def dockerfile(env_id: str, *, base: str | None = None) -> str:
    """FROM the env image (or `base`, the same image pinned by digest), `repo/` at /testbed as a
    one-commit git repository owned by the agent user, who can edit it; root stays the default
    user (SWE-bench's harness and a verifier run as root)."""
    return "\n".join([
        f"FROM {base or image_tag(env_id)}",
        f"COPY repo/ {TESTBED}/",
        "RUN git config --system user.name featdel && git config --system user.email featdel@localhost \\",
        f" && git config --system --add safe.directory {TESTBED} && cd {TESTBED} && git init -q -b main \\",
        f" && git add -A && GIT_AUTHOR_DATE={_DATE} GIT_COMMITTER_DATE={_DATE} git commit -q --no-gpg-sign -m start \\",
        f" && chown -R {AGENT_USER}:{AGENT_USER} {TESTBED}",
        f"WORKDIR {TESTBED}",
        "# SWE-bench's harness keeps a container up with `tail -f`, which ignores docker stop's SIGTERM.",
        "STOPSIGNAL SIGKILL",
        "",
    ])


def write_start_state(task: TaskRow, env: EnvRow, dest: Path) -> Path:
    """The task's start state at `dest`, without `.git` (the image makes the repository)."""
    trees.start_state_of(env.snapshot, task.deletion_patch, dest)
    shutil.rmtree(dest / ".git")
    return dest


def build(task: TaskRow, env: EnvRow) -> tuple[str, bool]:
    """(image name, built now): `dockerfile` over the start state, FROM the env image, offline."""
    from featdel.sandboxes import images

    name = task_image_tag(task.instance_id)
    recipe = hashlib.sha256(f"{dockerfile(env.env_id)}\0{task.start_sha256}".encode()).hexdigest()
    if (images.labels(name) or {}).get("featdel.recipe") == recipe:
        return name, False  # an image made from another Dockerfile or start state is made again
    if not images.image_exists(image_tag(env.env_id)):
        raise EnvBuildError(f"no image {image_tag(env.env_id)}: run `featdel env build RUN --sandbox docker` first")
    with tempfile.TemporaryDirectory(prefix="featdel-taskimage-") as tmp:
        repo = write_start_state(task, env, Path(tmp) / "repo")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            text = dockerfile(env.env_id).encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(text)
            tar.addfile(info, io.BytesIO(text))
            tar.add(str(repo), arcname="repo")
    buf.seek(0)
    try:
        images.client().images.build(fileobj=buf, custom_context=True, tag=name, rm=True, forcerm=True,
                                     pull=False, network_mode="none",
                                     labels={"featdel.instance_id": task.instance_id, "featdel.env_id": env.env_id,
                                             "featdel.recipe": recipe})
    except Exception as exc:  # docker's BuildError carries the failing step's log
        log = "".join(str(c.get("stream", "")) for c in getattr(exc, "build_log", []) or [])
        if "git: not found" in log or "git: command not found" in log:
            raise EnvBuildError(f"{image_tag(env.env_id)} has no git (built before featdel's base had it): "
                                f"`docker rmi {image_tag(env.env_id)}` and build it again") from None
        raise EnvBuildError(f"building {name} failed: {type(exc).__name__}: {str(exc)[:300]} {log[-300:]}") from None
    return name, True


def build_all(run_dir: Path, *, only_env: str | None = None,
              on_step: Callable[[str, str], None] = lambda item, step: None) -> list[Built]:
    """Build every task's start-state image (of one env, with `only_env`); a failure is that
    task's recorded reason, never the end of the batch."""
    envs = {e.env_id: e for e in env_rows(run_dir, only_env)}
    out = []
    for task in (t for t in task_rows(run_dir) if t.env_id in envs):
        on_step(task.instance_id, "building")
        try:
            name, fresh = build(task, envs[task.env_id])
            out.append(Built(env_id=task.instance_id, backend="docker", where=name,
                             status="built" if fresh else "reused"))
        except Exception as exc:  # docker fails in many ways: one task's failure is its own
            reason = str(exc) if isinstance(exc, EnvBuildError) else f"{type(exc).__name__}: {str(exc)[:300]}"
            out.append(Built(env_id=task.instance_id, backend="docker", where="", status="failed", reason=reason))
        on_step(task.instance_id, "done")
    return out

"""Write a task's start state from the Parquet shards alone, exactly as a learner gets it.

In: a packaged run directory and an instance id. Out: DEST holding the scrubbed start state as
a fresh git repository with one commit, and a message saying how to enter its environment
(pytest in its venv, or for a JavaScript/TypeScript task its runner from its node_modules).
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pyarrow.compute as pc

from featdel.code.trees import start_state_of
from featdel.core.errors import RunDirError
from featdel.core.shards import read_envs, read_tasks


def load_task(run_dir: Path, instance_id: str) -> tuple[dict, dict]:
    tasks = read_tasks(run_dir)
    hit = tasks.filter(pc.equal(tasks["instance_id"], instance_id)).to_pylist()
    if not hit:
        raise RunDirError(f"no task {instance_id} in {run_dir}; `featdel show {run_dir}` lists them")
    envs = read_envs(run_dir)
    env = envs.filter(pc.equal(envs["env_id"], hit[0]["env_id"])).to_pylist()
    if not env:
        raise RunDirError(f"{run_dir}/envs has no environment {hit[0]['env_id']}; run `featdel package` again")
    return hit[0], env[0]


def materialize(run_dir: Path, instance_id: str, dest: Path) -> str:
    dest = Path(dest).absolute()  # git's work tree would be read relative to the new folder
    if dest.exists():
        raise RunDirError(f"{dest} exists; give a new directory")
    task, env = load_task(run_dir, instance_id)
    start_state_of(env["snapshot"], task["deletion_patch"], dest)
    from featdel.env.sources import cache_root

    env_root = cache_root() / "envs" / task["env_id"]
    if (task.get("language") or "python") != "python":
        files = " ".join(sorted({shlex.quote(t.split("::")[0]) for t in task["FAIL_TO_PASS"]}))
        runner = task["test_cmd"][0] if task["test_cmd"] else "mocha"
        binary = "node --test" if runner == "node-test" else str(env_root / "node_modules" / ".bin" / runner) + (
            " run" if runner == "vitest" else "")
        return (
            f"start state of {instance_id} ({task.get('language')}) written to {dest} (one commit, no history).\n"
            f"Its environment is {env_root} (built by `featdel mine`; node_modules beside the tree; recipe: "
            f"{env['install']}).\n"
            f"Run the files of its failing tests in the sandbox, with the start state in place of the env's checkout:\n"
            f"  featdel sandbox exec --workdir {dest} --mount-at {env_root / 'src'} --readonly {env_root / 'node_modules'} "
            f"-- {binary} {files}"
        )
    tests = " ".join(shlex.quote(t) for t in task["FAIL_TO_PASS"][:3])
    return (
        f"start state of {instance_id} written to {dest} (one commit, no history).\n"
        f"Its environment is {env_root} (built by `featdel mine` or `featdel env build`; recipe: {env['install']}).\n"
        f"Run its failing tests in the sandbox, with the start state in place of the env's checkout:\n"
        f"  featdel sandbox exec --workdir {dest} --mount-at {env_root / 'src'} -- "
        f"{env_root / 'venv/bin/python'} -m pytest {tests}"
    )

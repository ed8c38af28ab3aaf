"""One virtual environment per repo@commit@recipe, built once and reused.

In: a `PinnedSource` and a `Recipe`. Out: an `Env` whose `src/` holds the tree at the commit
(no VCS data) installed editable into `venv/`. The directory name is the cache key
(repo, commit, recipe hash); a `ready.json` marker written last makes a half-built env count as
missing, so an interrupted build is redone rather than trusted.

The install tools stay out (featdel.env.tools): the venv is made without pip and uv (or, where
uv is missing or refuses a step, the host's pip) installs into it; pip, setuptools and wheel go
in only when the repository's own code or tests import them, and one a dependency pulled in
leaves after the install, so a test run sees no vendored copy of another library that only the
installer needed.

Locks: after the install, the venv's distributions (`pip freeze --all`, the repo itself left
out) and the interpreter's exact version go into `recipe.lock` and `recipe.python`. The
packaged `env_id` is content-addressed from repo name, commit, python and lock (`env_id()`), so
two machines that build the same env agree on it; `cache_root()/envs/<env_id>` is a relative
symlink to the recipe-keyed directory, which is where `featdel evaluate` looks an env up.

The install runs the repository's own build code with the network on; it happens on the host
before any test runs (mining trusts the upstream repository; only tests and learner code run
sandboxed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from featdel.core.errors import EnvBuildError
from featdel.core.records import Recipe
from featdel.core.shards import env_id
from featdel.env.sources import PinnedSource, cache_root, checkout


@dataclass(frozen=True, kw_only=True, slots=True)
class Env:
    root: Path
    recipe: Recipe

    @property
    def src(self) -> Path:
        return self.root / "src"

    @property
    def venv(self) -> Path:
        return self.root / "venv"

    @property
    def python_prefix(self) -> Path:
        """The interpreter installation the venv links to: sandboxes must see it read-only."""
        return Path(sys.base_prefix)

    def environ(self) -> dict[str, str]:
        """Variables for running the repo's commands in this environment."""
        return {
            "PATH": f"{self.venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "VIRTUAL_ENV": str(self.venv),
            "HOME": str(self.root / "home"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONHASHSEED": "0",
            "LANG": "C.UTF-8",
        }


def env_dir(source: PinnedSource, recipe: Recipe) -> Path:
    return cache_root() / "envs" / f"{source.name}-{source.commit[:12]}-{recipe.key()}"


def load(root: Path) -> Env | None:
    """The env at `root` (a build directory or an `env_id` link to one), or None if unbuilt."""
    marker = root / "ready.json"
    if not marker.exists():
        return None
    from featdel.core.records import from_dict

    # Resolved: the venv and the editable install point at the real directory, never the link.
    return Env(root=root.resolve(), recipe=from_dict(Recipe, json.loads(marker.read_text())["recipe"]))


def save(env: Env, name: str, commit: str) -> Env:
    """Record `env.recipe` (locked, refined) in the marker and link `env_id` to the env."""
    marker = env.root / "ready.json"
    tmp = marker.with_suffix(".tmp")
    tmp.write_text(json.dumps({"recipe": asdict(env.recipe), "repo": name, "commit": commit}, indent=1))
    tmp.replace(marker)
    link = env.root.parent / env_id(name, commit, env.recipe)
    if link != env.root and not (link.is_symlink() and os.readlink(link) == env.root.name):
        if not link.is_symlink() and link.exists():
            return env  # a real env built under that id (e.g. from the shards): it is the same env
        part = link.with_name(f".{link.name}.{os.getpid()}")
        part.unlink(missing_ok=True)
        part.symlink_to(env.root.name)
        part.replace(link)
    return env


def lock(venv: Path) -> tuple[str, list[str]]:
    """(exact interpreter version, sorted `NAME==VERSION` of every distribution but the repo),
    read by this interpreter's pip (`--python`): the venv may hold no pip of its own."""
    python = str(venv / "bin" / "python")
    # What the venv holds, not what the caller's PYTHONPATH adds to it.
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE")}
    try:
        version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                                 capture_output=True, text=True, timeout=60, check=True, env=clean).stdout.strip()
        frozen = subprocess.run([sys.executable, "-m", "pip", "--python", python, "freeze", "--all",
                                 "--exclude-editable", "--disable-pip-version-check"],
                                capture_output=True, text=True, timeout=120, check=True, env=clean).stdout
    except (subprocess.SubprocessError, OSError) as exc:
        raise EnvBuildError(f"could not list the installed distributions of {venv}: {exc}") from None
    lines = set()
    for line in frozen.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "-e ")):
            continue
        if " @ " in line:  # a direct reference: keep the name, never a local path
            name, url = line.split(" @ ", 1)
            line = f"{name} @ local" if url.startswith("file:") else line
        lines.add(line)
    return version, sorted(lines, key=str.lower)


def _locked(env: Env, source: PinnedSource) -> Env:
    """The env with its lock (what the install left in the venv), recorded the first time it is used."""
    if env.recipe.lock:
        return env
    from dataclasses import replace

    version, dists = lock(env.venv)
    return save(Env(root=env.root, recipe=replace(env.recipe, python=version, lock=dists)),
                source.name, source.commit)


def build(source: PinnedSource, recipe: Recipe, *, tree_ready: Path | None = None, timeout_s: float = 1200) -> Env:
    """Build (or reuse) the environment. `tree_ready` is a checkout to move into place."""
    root = env_dir(source, recipe)
    existing = load(root)
    if existing is not None:
        return _locked(existing, source)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    env = Env(root=root, recipe=recipe)
    if tree_ready is not None:
        shutil.copytree(tree_ready, env.src, symlinks=True)
    else:
        checkout(source, env.src)
    (root / "home").mkdir()
    log = root / "build.log"
    from featdel.env import tools

    # no pip in the venv: the host's pip installs into it (tools.host_pip), and the install tools
    # go in only when the repository's own files import them
    _run([sys.executable, "-m", "venv", "--without-pip", str(env.venv)], cwd=root, env=os.environ, log=log,
         timeout=300)
    variables = {**os.environ, **env.environ(), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    variables.pop("PYTHONDONTWRITEBYTECODE")  # byte-compiling the venv once saves every test run
    keep = tools.keep_for(env.src)
    steps = ([["pip", "install", "-q", *sorted(keep)]] if keep else []) + recipe.install
    for i, argv in enumerate(steps):
        _install(argv, env, variables, log, timeout_s, last=i == len(steps) - 1)
    _scrub_build_outputs(env.src)
    tools.strip(env.venv, keep, log)  # what a dependency pulled in (setuptools, most often)
    return _locked(env, source)


def _install(argv: list[str], env: Env, variables: dict[str, str], log: Path, timeout: float, *,
             last: bool = True) -> None:
    """One install step of the recipe: by uv when it can (featdel.env.tools.through_uv; the
    `last` step byte-compiles the venv), else, or when uv refuses what pip accepts (old metadata
    uv holds invalid), by the host's pip."""
    from featdel.env import tools

    fast = tools.through_uv(argv, env.venv, compile_all=last)
    if fast is not None:
        try:
            return _run(fast, cwd=env.src, env={**variables, **tools.uv_environ()}, log=log, timeout=timeout)
        except _TimedOut:
            raise
        except EnvBuildError:
            with log.open("a") as fh:
                fh.write("# uv failed: the same step with pip\n")
    _run(tools.through_host_pip(argv, env.venv), cwd=env.src, env=variables, log=log, timeout=timeout)


class _TimedOut(EnvBuildError):
    pass


def _run(argv: list[str], *, cwd: Path, env, log: Path, timeout: float) -> None:
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n")
        fh.flush()
        try:
            done = subprocess.run(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise _TimedOut(f"install step timed out after {timeout:.0f}s: {' '.join(argv)} (see {log})") from None
    if done.returncode != 0:
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:]
        raise EnvBuildError(f"install failed: {' '.join(argv[2:])}: {tail[0][:200] if tail else ''} (see {log})")


def _scrub_build_outputs(tree: Path) -> None:
    """An editable install may leave egg-info or build/ in the tree: not part of the source."""
    for pattern in ("*.egg-info", "src/*.egg-info", "build"):
        for path in tree.glob(pattern):
            shutil.rmtree(path, ignore_errors=True)

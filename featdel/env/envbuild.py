"""`featdel env build`: environments rebuilt from the env rows alone (snapshot + lock).

In: a packaged run directory's `envs/*.parquet` (nothing else of the machine that made it). Out,
per env row, one of:

- local: `cache_root()/envs/<env_id>/{src,venv,home,ready.json}`, built with this machine's
  interpreter, where `featdel.env.envs.load` and `featdel evaluate` look an env up;
- docker: an image `image_tag(env_id)` (`featdel-env:<env_id>`) holding the base image's
  interpreter (/usr/bin/python3), a venv at `VENV` and an empty `TESTBED`, where the tree under
  test is mounted or copied (the editable install points there). No host path is inside, so
  the image runs anywhere; `ImageEnv` grades in it with only featdel's plugin bound in.

Both install the same way. The lock's exact distributions become wheels on the host, in
`cache_root()/wheels`, together with the repo's build requirements. Then `pip install
--no-index --no-deps` installs the locked versions and the repo editable. The host downloads so
that a container needs no network, no index and no proxy certificates, and so that the two
backends install the same files. A row without a lock is refused with a one-line error.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from featdel.core.errors import EnvBuildError
from featdel.core.records import Recipe
from featdel.core.shards import EnvRow, env_rows, image_tag
from featdel.env import tools

TESTBED = Path("/testbed")  # the tree under test inside an image (SWE-bench's convention)
VENV = Path("/opt/featdel/venv")
BACKENDS = ("local", "docker")
_DEFAULT_BUILD_REQUIRES = ["setuptools>=40.8.0", "wheel"]  # PEP 517's fallback


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageEnv:
    """An env baked into a docker image at fixed paths. Quacks like `featdel.env.envs.Env` for
    `featdel.env.testrun`: `root` is a host folder holding only the report plugin, the one thing a
    test run binds in from the host (`in_image` tells testrun not to bind a venv or interpreter)."""

    root: Path
    recipe: Recipe
    image: str
    in_image: ClassVar[bool] = True

    @property
    def src(self) -> Path:
        return TESTBED

    @property
    def venv(self) -> Path:
        return VENV

    @property
    def python_prefix(self) -> Path:
        return Path("/usr")  # inside the image; never bound from the host

    def environ(self) -> dict[str, str]:
        return {"PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(VENV), "HOME": "/tmp",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"}


def image_env(row: EnvRow) -> ImageEnv | None:
    """The graded form of a docker-built env, or None when its image is not on this engine."""
    from featdel.env.sources import cache_root
    from featdel.sandboxes import images

    name = image_tag(row.env_id)
    if images.engine_reason() is not None or not images.image_exists(name):
        return None
    root = cache_root() / "image-envs" / row.env_id
    root.mkdir(parents=True, exist_ok=True)
    return ImageEnv(root=root, recipe=row.recipe(), image=name)


def read_rows(run_dir: Path, only: str | None = None) -> list[EnvRow]:
    return env_rows(run_dir, only)


@dataclass(frozen=True, kw_only=True, slots=True)
class Built:
    env_id: str
    backend: str
    where: str  # the env directory or the image name
    status: str  # "built", "reused" or "failed"
    reason: str = ""


def build_all(run_dir: Path, *, backend: str = "local", only: str | None = None,
              on_step: Callable[[str, str], None] = lambda item, step: None,
              build: Callable[[EnvRow, str], tuple[str, bool]] | None = None) -> list[Built]:
    """Build every env of the run (or `only` one); a failure is recorded, never the end of the batch.
    `build(row, backend)` builds one row (`featdel.lang.rebuild_env`, every language's); without
    it this module builds Python's and records another language's row as failed."""
    if backend not in BACKENDS:
        raise EnvBuildError(f"unknown backend {backend!r}: choose local or docker")
    out = []
    for row in read_rows(run_dir, only):
        on_step(row.env_id, "building")
        try:
            if build is not None:
                where, fresh = build(row, backend)
            elif row.language != "python":
                raise EnvBuildError(f"{row.env_id} is {row.language}: build it through featdel.lang.rebuild_env")
            else:
                where, fresh = build_local(row) if backend == "local" else build_image(row)
            out.append(Built(env_id=row.env_id, backend=backend, where=where, status="built" if fresh else "reused"))
        except Exception as exc:  # docker and pip fail in many ways: one env's failure is its own
            reason = str(exc) if isinstance(exc, EnvBuildError) else f"{type(exc).__name__}: {str(exc)[:300]}"
            out.append(Built(env_id=row.env_id, backend=backend, where="", status="failed", reason=reason))
        on_step(row.env_id, "done")
    return out


def build_local(row: EnvRow) -> tuple[str, bool]:
    """(env directory, built now) for `row` in this machine's cache."""
    from featdel.env import envs
    from featdel.env.sources import cache_root

    root = cache_root() / "envs" / row.env_id
    if envs.load(root) is not None:
        return str(root), False
    _locked(row)
    _same_minor(row, sys.version_info[:2], "this interpreter")
    if root.is_symlink():
        root.unlink()
    shutil.rmtree(root, ignore_errors=True)
    (root / "home").mkdir(parents=True)
    src, venv, log = root / "src", root / "venv", root / "build.log"
    _extract(row.snapshot, src)
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=root, log=log)
    env = {"PATH": f"{venv}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(venv), "HOME": str(root / "home"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "LANG": "C.UTF-8"}
    wheels = wheelhouse(row, src)
    pip = [*tools.host_pip(venv), "install", "-q", "--no-index", "--find-links", str(wheels), "--no-deps"]
    _run([*pip, *requirements(row.lock)], cwd=src, log=log, env=env)
    _run([*pip, "-e", "."], cwd=src, log=log, env=env)
    tools.strip(venv, tools.locked(row.lock), log)  # the lock names the install tools the env kept
    for junk in (*src.glob("*.egg-info"), *src.glob("src/*.egg-info"), src / "build"):
        shutil.rmtree(junk, ignore_errors=True)
    marker = {"recipe": asdict(row.recipe()), "repo": row.repo, "commit": row.base_commit, "built_from": "shards"}
    (root / "ready.json").write_text(json.dumps(marker, indent=1))
    return str(root), True


def build_image(row: EnvRow, *, base: str | None = None) -> tuple[str, bool]:
    """(image name, built now): the base image plus a venv at VENV holding the lock and the repo
    installed editable from TESTBED, whose contents are then removed."""
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import images

    _locked(row)
    name = image_tag(row.env_id)
    try:
        base = base or images.BASE_IMAGE
        if _built_on(name) == base:
            return name, False  # one built FROM another base (an older featdel's) is built again
        base = images.build_base_image(base)
    except SandboxError as exc:
        raise EnvBuildError(str(exc)) from None
    _same_minor(row, (3, 11), f"the base image {base}")  # Debian bookworm's python3
    with tempfile.TemporaryDirectory(prefix="featdel-envbuild-") as tmp:
        src = _extract(row.snapshot, Path(tmp) / "src")
        wheels = wheelhouse(row, src)
        strip = sorted(set(tools.TOOLS) - tools.locked(row.lock), key=lambda t: t == "pip")  # pip last
        context = _context_tar(src, "\n".join(requirements(row.lock)) + "\n", "".join(f"{t}\n" for t in strip))
    _run_build_container(base, name, row, context, wheels)
    return name, True


_SCRIPT = f"""set -eu
export PIP_NO_INDEX=1 PIP_FIND_LINKS=/featdel-wheels PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
python3 -m venv {VENV}
cd {TESTBED}
{VENV}/bin/python -m pip install -q --no-deps -r /featdel-build/requirements.txt
{VENV}/bin/python -m pip install -q --no-deps -e .
if [ -s /featdel-build/strip.txt ]; then {VENV}/bin/python -m pip uninstall -y -q -r /featdel-build/strip.txt; fi
find {TESTBED} -mindepth 1 -delete
rm -rf /featdel-build /root/.cache
"""


def _run_build_container(base: str, name: str, row: EnvRow, context: bytes, wheels: Path) -> None:
    from docker.types import Mount

    from featdel.sandboxes import images

    c = images.client()
    box = c.containers.create(base, ["sh", "-c", _SCRIPT], user="0:0", network_mode="none", working_dir="/",
                              mounts=[Mount("/featdel-wheels", str(wheels), type="bind", read_only=True)])
    try:
        if not c.api.put_archive(box.id, "/", context):
            raise EnvBuildError(f"docker refused the build context for {name}")
        box.start()
        status = box.wait(timeout=1800)
        if status.get("StatusCode") != 0:
            tail = box.logs(tail=15).decode(errors="replace").strip()
            raise EnvBuildError(f"building {name} failed: {tail[-400:]}")
        repository, _, tag = name.partition(":")
        labels = json.dumps({"featdel.env_id": row.env_id, "featdel.repo": row.repo, "featdel.base": base})
        box.commit(repository=repository, tag=tag, changes=[
            f"ENV VIRTUAL_ENV={VENV} PATH={VENV}/bin:/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
            f"WORKDIR {TESTBED}", 'CMD ["/bin/bash"]', f"LABEL featdel={json.dumps(labels)}"])
    finally:
        box.remove(force=True)


def _built_on(name: str) -> str | None:
    """The base image an env image was built FROM, as its label records it (None: no such image)."""
    from featdel.sandboxes import images

    try:
        return json.loads((images.labels(name) or {}).get("featdel", "{}")).get("featdel.base")
    except (ValueError, AttributeError):
        return None


def requirements(lock: list[str]) -> list[str]:
    """pip requirements for a lock's lines. A direct reference installs by name from the
    wheelhouse; a local file (`NAME @ local`) cannot be rebuilt anywhere else."""
    out = []
    for line in lock:
        name, sep, where = line.partition(" @ ")
        if sep and where.strip() == "local":
            raise EnvBuildError(f"the lock installs {name} from a local file, which no other machine has")
        out.append(name.strip() if sep else line.strip())
    return out


def wheelhouse(row: EnvRow, tree: Path) -> Path:
    """`cache_root()/wheels` holding a wheel of every locked distribution and the repo's build
    requirements (with their dependencies). Locked wheels already there are not fetched again."""
    from featdel.env.sources import cache_root

    wheels = cache_root() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    have = {_canon(p.name.split("-")[0]) + "==" + p.name.split("-")[1] for p in wheels.glob("*.whl")}
    missing = []
    for line in row.lock:
        name, sep, url = line.partition(" @ ")
        if sep:
            missing.append(line)
        elif "==" in line and _canon(line.split("==")[0]) + "==" + line.split("==")[1].strip() not in have:
            missing.append(line)
    log = wheels / "pip-wheel.log"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(wheels)]
    if missing:
        _run([*pip, "--no-deps", *missing], cwd=wheels, log=log, timeout=1800)
    _run([*pip, *_build_requires(tree)], cwd=wheels, log=log, timeout=1800)
    extra = _editable_requires(tree, wheels, log)
    if extra:
        _run([*pip, *extra], cwd=wheels, log=log, timeout=1800)
    return wheels


_ASK_BACKEND = """import json, sys
from pip._vendor.pyproject_hooks import BuildBackendHookCaller
hooks = BuildBackendHookCaller(sys.argv[1], sys.argv[2], backend_path=json.loads(sys.argv[3]) or None)
print(json.dumps(hooks.get_requires_for_build_editable()))
"""


def _editable_requires(tree: Path, wheels: Path, log: Path) -> list[str]:
    """What the build backend asks for on top of `build-system.requires` to install the repo
    editable (hatchling asks for `editables`): the image's offline `pip install -e .` needs those
    wheels too. Asked of the backend itself, in a scratch venv holding the build requirements."""
    try:
        system = tomllib.loads((tree / "pyproject.toml").read_text()).get("build-system", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return []
    backend = system.get("build-backend")
    if not isinstance(backend, str) or not backend:
        return []  # setuptools' legacy path: its wheel is already there
    with tempfile.TemporaryDirectory(prefix="featdel-backend-") as tmp:
        venv = Path(tmp) / "venv"
        _run([sys.executable, "-m", "venv", str(venv)], cwd=wheels, log=log, timeout=300)  # _ASK_BACKEND uses its pip
        python = str(venv / "bin" / "python")
        _run([python, "-m", "pip", "install", "-q", "--no-index", "--find-links", str(wheels),
              *_build_requires(tree)], cwd=wheels, log=log, timeout=600)
        out = _run([python, "-c", _ASK_BACKEND, str(tree), backend, json.dumps(system.get("backend-path") or [])],
                   cwd=tree, log=log, timeout=600)
    try:
        asked = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return []
    return [str(r) for r in asked if isinstance(r, str)]


def _build_requires(tree: Path) -> list[str]:
    try:
        data = tomllib.loads((tree / "pyproject.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return list(_DEFAULT_BUILD_REQUIRES)
    requires = data.get("build-system", {}).get("requires")
    return [str(r) for r in requires] if isinstance(requires, list) and requires else list(_DEFAULT_BUILD_REQUIRES)


def _locked(row: EnvRow) -> None:
    if not row.lock:
        raise EnvBuildError(f"{row.env_id} has no lock: package the run again with this featdel "
                            "(`featdel package RUN`), which records what mining installed")


def _same_minor(row: EnvRow, have: tuple[int, int], what: str) -> None:
    wanted = tuple(int(x) for x in re.findall(r"\d+", row.python)[:2])
    if len(wanted) == 2 and wanted != tuple(have):
        raise EnvBuildError(f"{row.env_id} was locked with Python {row.python}; {what} is "
                            f"{have[0]}.{have[1]}, whose wheels may not match")


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _extract(snapshot: bytes, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(snapshot), mode="r:*") as tf:
        tf.extractall(dest, filter="data")
    return dest


def _context_tar(src: Path, requirements_txt: str, strip_txt: str = "") -> bytes:
    """The tree at TESTBED, and at /featdel-build the requirements and the install tools to
    remove afterwards (featdel.env.tools), as one tar for put_archive."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=str(TESTBED).lstrip("/"))
        for name, text in (("requirements.txt", requirements_txt), ("strip.txt", strip_txt)):
            data = text.encode()
            info = tarfile.TarInfo(f"featdel-build/{name}")
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _run(argv: list[str], *, cwd: Path, log: Path, env: dict[str, str] | None = None, timeout: float = 1200) -> str:
    import os

    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        raise EnvBuildError(f"timed out after {timeout:.0f}s: {' '.join(argv[:6])} (see {log})") from None
    with log.open("a") as fh:
        fh.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
    if done.returncode != 0:
        tail = [ln for ln in done.stderr.splitlines() if ln.strip()][-1:] or ["no output"]
        raise EnvBuildError(f"{' '.join(argv[2:6])} failed: {tail[0][:240]} (see {log})")
    return done.stdout

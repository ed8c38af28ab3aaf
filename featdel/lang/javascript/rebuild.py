"""JavaScript environments rebuilt from an env row alone (`featdel env build`), here or as an image.

In: an `EnvRow` of a JavaScript/TypeScript task (snapshot, `install_files`: the env root's
package.json and the lock npm installed from, and `lock`: `node@VERSION` and every locked
package). Out, as `featdel.env.envbuild` does for Python:

- local: `cache_root()/envs/<env_id>/{src,node_modules,home,ready.json}`, the layout of
  `featdel.lang.javascript.envs`, where `featdel evaluate` loads it;
- docker: the image `image_tag(env_id)`: the base image, the host's node at `IMAGE_NODE`, the
  locked install at `IMAGE_MODULES` and an empty `TESTBED`. Node resolves a package by walking up
  from the file that asks, so a tree at /testbed finds /node_modules; no host path is inside, so
  the image runs anywhere, and `ImageNodeEnv` grades in it with only featdel's reporters bound in.

Both install with `npm ci --ignore-scripts` from the row's lock, on the host (the registry and
npm's cache are the host's; with no install scripts the files are the same wherever they land),
after checking that the lock is the one `lock` lists and that this node is the recorded major,
then remove the package's own copies as mining did (`envs.prune_own_copies`), so the install is
exactly `lock` again.
Node in the image is the host's binary, not Debian's: bookworm packages Node 18, and the lock
records the node the baselines ran.
"""

from __future__ import annotations

import io
import json
import os
import tarfile
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from featdel.core.errors import EnvBuildError
from featdel.core.records import Recipe
from featdel.core.shards import EnvRow, image_tag
from featdel.env.envbuild import TESTBED
from featdel.lang.javascript import envs

IMAGE_NODE = Path("/usr/local/bin/node")
IMAGE_MODULES = Path("/node_modules")
_INSTALL_NAMES = ("package.json", ".npmrc", *envs.LOCKS)


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageNodeEnv:
    """A JavaScript env baked into an image at fixed paths; quacks like `NodeEnv` for the runners.
    `root` is a host folder holding only the reporters, the one thing a run binds in."""

    root: Path
    recipe: Recipe
    image: str
    in_image: ClassVar[bool] = True

    @property
    def src(self) -> Path:
        return TESTBED

    @property
    def node_modules(self) -> Path:
        return IMAGE_MODULES

    @property
    def runner(self) -> str:
        return self.recipe.test_cmd[0]

    @property
    def node(self) -> str:
        return str(IMAGE_NODE)

    def environ(self) -> dict[str, str]:
        return image_environ()


def image_environ() -> dict[str, str]:
    """The variables of a test run in an env image (the exports' eval scripts set the same)."""
    return {"PATH": f"{IMAGE_MODULES / '.bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
            "CI": "1", "NO_COLOR": "1", "FORCE_COLOR": "0"}


def install_files(env_root: Path) -> list[dict]:
    """The env root's package.json, .npmrc and lock, as the env row's `install_files`."""
    return [{"path": name, "text": (Path(env_root) / name).read_text()}
            for name in _INSTALL_NAMES if (Path(env_root) / name).is_file()]


def image_env(row: EnvRow) -> ImageNodeEnv | None:
    """The graded form of a docker-built env, or None when its image is not on this engine."""
    from featdel.env.sources import cache_root
    from featdel.sandboxes import images

    name = image_tag(row.env_id)
    if images.engine_reason() is not None or not images.image_exists(name):
        return None
    root = cache_root() / "image-envs" / row.env_id
    root.mkdir(parents=True, exist_ok=True)
    return ImageNodeEnv(root=root, recipe=row.recipe(), image=name)


def build_local(row: EnvRow) -> tuple[str, bool]:
    """(env directory, built now) for `row` in this machine's cache."""
    import shutil

    from featdel.env.envbuild import _extract
    from featdel.env.sources import cache_root

    root = cache_root() / "envs" / row.env_id
    if envs.load(root) is not None:
        return str(root), False
    _check(row)
    if root.is_symlink():
        root.unlink()
    shutil.rmtree(root, ignore_errors=True)
    (root / "home").mkdir(parents=True)
    _extract(row.snapshot, root / "src")
    _install(row, root)
    marker = {"recipe": asdict(row.recipe()), "repo": row.repo, "commit": row.base_commit, "built_from": "shards"}
    (root / "ready.json").write_text(json.dumps(marker, indent=1))
    return str(root), True


def build_image(row: EnvRow, *, base: str | None = None) -> tuple[str, bool]:
    """(image name, built now): the base, the host's node, the locked install at IMAGE_MODULES."""
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import images

    _check(row)
    name = image_tag(row.env_id)
    node = Path(envs.node_binary())
    try:
        base = images.build_base_image(base or images.BASE_IMAGE)
        if _label(name) == {"base": base, "node": envs.node_version()}:
            return name, False
        node_image = _node_image(base, node)
    except SandboxError as exc:
        raise EnvBuildError(str(exc)) from None
    with tempfile.TemporaryDirectory(prefix="featdel-envbuild-", dir="/var/tmp") as tmp:
        root = Path(tmp)
        _install(row, root)
        with tempfile.TemporaryFile(dir="/var/tmp") as fh:
            with tarfile.open(fileobj=fh, mode="w") as tar:
                tar.add(str(root / "node_modules"), arcname=str(IMAGE_MODULES).lstrip("/"))
                _add_dir(tar, str(TESTBED).lstrip("/"))
            fh.seek(0)
            labels = {"featdel.env_id": row.env_id, "featdel.repo": row.repo, "featdel.base": base,
                      "featdel.node": envs.node_version()}
            _commit(node_image, fh, name, [
                f"ENV PATH={IMAGE_MODULES}/.bin:/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
                f"WORKDIR {TESTBED}", 'CMD ["/bin/bash"]', f"LABEL featdel={json.dumps(json.dumps(labels))}"])
    return name, True


def _check(row: EnvRow) -> None:
    """The row names a lock, the lock is the one `lock` lists, and this node is its major version."""
    files = {f["path"]: f["text"] for f in row.install_files}
    if "package.json" not in files or not any(n in files for n in envs.LOCKS):
        raise EnvBuildError(f"{row.env_id} records no package.json and lock: package the run again with this "
                            "featdel (`featdel package RUN`), which records the lock mining installed from")
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in files.items():
            (Path(tmp) / rel).write_text(text)
        entries = set(envs.lock_entries(Path(tmp)))
    locked = {e for e in row.lock if not e.startswith("node@")}
    try:
        own = json.loads(files["package.json"]).get("name")
    except ValueError:
        own = None
    # mining removed the package's own copies no test tool loads (envs.prune_own_copies), and
    # left them out of `lock`: those, and only those, may be in the lock file besides
    extra = {e.rsplit("@", 1)[0] for e in entries - locked}
    if locked - entries or any(not (own and path.endswith(f"node_modules/{own}")) for path in extra):
        raise EnvBuildError(f"{row.env_id}: the recorded lock file does not hold the packages `lock` lists")
    wanted = next((e.removeprefix("node@") for e in row.lock if e.startswith("node@")), "")
    have = envs.node_version()
    if wanted.split(".")[0] != have.split(".")[0]:
        raise EnvBuildError(f"{row.env_id} was locked with node {wanted or '?'}; this node is {have}")


def _install(row: EnvRow, root: Path) -> None:
    """`npm ci --ignore-scripts` at `root` from the row's package.json and lock."""
    for f in row.install_files:
        if "/" in f["path"] or f["path"] not in _INSTALL_NAMES:
            raise EnvBuildError(f"{row.env_id}: install file {f['path']!r} is not one npm reads at the env root")
        (root / f["path"]).write_text(f["text"])
    ci = next((argv for argv in reversed(row.install) if "ci" in argv), None)
    ci = ci or ["npm", "--no-audit", "--no-fund", "--ignore-scripts", "ci"]
    if ci[0] != "npm" or "--ignore-scripts" not in ci:
        raise EnvBuildError(f"{row.env_id}: the recorded install {ci} is not npm without install scripts")
    from featdel.env.sources import cache_root

    variables = {**os.environ, "npm_config_cache": str(cache_root() / "npm-cache"),
                 "npm_config_update_notifier": "false"}
    envs._run(ci, cwd=root, env=variables, log=root / "build.log", timeout=1200)
    (root / "node_modules").mkdir(exist_ok=True)  # a package with no dependencies
    pruned = envs.prune_own_copies(root, row.recipe())
    left = [e for e in envs.lock_entries(root) if e.rsplit("@", 1)[0] not in pruned]
    if sorted(left) != sorted(e for e in row.lock if not e.startswith("node@")):
        raise EnvBuildError(f"{row.env_id}: the install differs from `lock` after removing the package's own "
                            f"copies ({', '.join(pruned) or 'none'})")


def _node_image(base: str, node: Path) -> str:
    """The base plus the host's node at IMAGE_NODE, shared by every env image built on them."""
    import hashlib

    from featdel.sandboxes import images

    st = node.stat()
    tag = hashlib.sha256(f"{images.client().images.get(base).id}{st.st_size}{st.st_mtime_ns}".encode()).hexdigest()[:16]
    name = f"featdel-node:{tag}"
    if images.image_exists(name):
        return name
    with tempfile.TemporaryFile(dir="/var/tmp") as fh:
        with tarfile.open(fileobj=fh, mode="w") as tar:
            info = tar.gettarinfo(str(node), arcname=str(IMAGE_NODE).lstrip("/"))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mode = 0o755
            with node.open("rb") as src:
                tar.addfile(info, src)
        fh.seek(0)
        _commit(base, fh, name, [])
    return name


def _commit(parent: str, archive, name: str, changes: list[str]) -> None:
    from featdel.sandboxes import images

    c = images.client()
    box = c.containers.create(parent, command=["true"])
    try:
        if not c.api.put_archive(box.id, "/", archive):
            raise EnvBuildError(f"docker refused the archive for {name}")
        repository, _, tag = name.partition(":")
        box.commit(repository=repository, tag=tag, changes=changes)
    finally:
        box.remove(force=True)


def _add_dir(tar: tarfile.TarFile, arcname: str) -> None:
    info = tarfile.TarInfo(arcname)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    tar.addfile(info, io.BytesIO())


def _label(name: str) -> dict | None:
    """The base and node an env image was built with (None: no such image)."""
    from featdel.sandboxes import images

    try:
        labels = json.loads((images.labels(name) or {}).get("featdel", "{}"))
    except ValueError:
        return None
    return {"base": labels.get("featdel.base"), "node": labels.get("featdel.node")} if labels else None

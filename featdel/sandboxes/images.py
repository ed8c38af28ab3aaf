"""Docker images for the sandboxes: the base image (pulled, or built offline), per-repo images.

In: a Docker engine (docker-py), and for per-repo images a repository's environment directory
(`<env_dir>/src` checkout, `<env_dir>/venv` made by the host interpreter at `python_prefix`; for
JavaScript `<env_dir>/node_modules` and the host's node binary: `build_node_repo_image`).
Out: image names. `build_base_image` tries `python:3.11-slim` from a registry and otherwise
debootstraps a minimal Debian with Python and imports it (no registry needed, about a minute).
`build_repo_image` lays the interpreter prefix and the env directory (checkout, venv) into an
image at the same absolute paths they have on the host, so the venv's links and its editable install resolve
unchanged; the name it returns is what a task's `image_name` records.

Why put_archive + commit instead of `docker build`: no build context to stage, the interpreter
layer is shared by every repo built on it, and paths under a 0700 /root need no copying dance.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes.base import SANDBOX_GID, SANDBOX_UID

BASE_IMAGE = "featdel-base:bookworm-2"  # the name changes with _PACKAGES
REGISTRY_BASE = "python:3.11-slim"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# git: SWE-bench's harness applies a prediction with `git apply` (and stops a run that overruns
# with procps' `kill`). Not `patch`, its last fallback: `patch` writes what `git apply` refuses,
# such as `.git/config`, and the harness then runs git as root in that repository.
_PACKAGES = "python3,python3-venv,python3-pip,ca-certificates,git,procps"
_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man",
         "usr/share/locale", "usr/share/info", "var/log")


def client():
    """A docker-py client, or SandboxError saying how to start the engine."""
    import docker

    try:
        c = docker.from_env(timeout=120)
        c.ping()
    except Exception as exc:  # docker-py raises several unrelated types for "no engine"
        raise SandboxError(f"cannot reach the Docker engine ({type(exc).__name__}): start it with "
                           "`dockerd >/var/log/dockerd.log 2>&1 &` or `systemctl start docker`") from exc
    return c


def engine_reason() -> str | None:
    try:
        client()
    except SandboxError as exc:
        return str(exc)
    return None


def image_exists(name: str) -> bool:
    import docker

    try:
        client().images.get(name)
        return True
    except docker.errors.ImageNotFound:
        return False


def labels(name: str) -> dict[str, str] | None:
    """The image's labels, or None when there is no such image."""
    import docker

    try:
        return client().images.get(name).labels or {}
    except docker.errors.ImageNotFound:
        return None


def pinned(name: str, registry: str | None = None) -> str | None:
    """`name` as REPOSITORY@sha256:DIGEST, a reference no later push can change: the digest of the
    image in `registry` (HOST:PORT; pushed there now, under the same repository and tag), else the
    one it already has in some registry, else None (an image that was never pushed has none)."""
    c = client()
    if registry:
        remote = f"{registry}/{name}"
        repository, _, tag = remote.rpartition(":")
        c.images.get(name).tag(repository, tag)
        for line in c.api.push(repository, tag, stream=True, decode=True):
            if "error" in line:
                raise SandboxError(f"pushing {remote} failed: {line['error']}")
    digests = c.images.get(name).attrs.get("RepoDigests") or []
    if registry:
        digests = [d for d in digests if d.startswith(f"{registry}/")]
    return sorted(digests)[0] if digests else None


# Third-party package dirs a Debian or python:*-slim image may carry: the distribution's
# dist-packages, pip's site-packages under /usr/local, and the wheels ensurepip installs from.
_THIRD_PARTY = ("/usr/lib/python3*/*-packages /usr/local/lib/python3*/*-packages "
                "/usr/share/python-wheels /usr/lib/python3*/ensurepip/_bundled "
                "/usr/local/lib/python3*/ensurepip/_bundled")
# Lists those that exist, then the image venv's pyvenv.cfg (if any) after a separator line.
_PROBE = (f'for d in {_THIRD_PARTY}; do [ -d "$d" ] && echo "$d"; done; echo ---; '
          'cat "$VIRTUAL_ENV/pyvenv.cfg" 2>/dev/null; exit 0')
_third_party: dict[str, tuple[Path, ...]] = {}


def third_party_dirs(image: str) -> tuple[Path, ...]:
    """The image's third-party Python package dirs, which sandbox containers cover with an
    empty tmpfs (its venv's, if it asks for system site-packages, excepted). Probed with one
    short container per image id and process, so it costs about 0.3 s once."""
    from featdel.sandboxes.hostpaths import venv_keeps

    image_id = client().images.get(image).id
    if image_id not in _third_party:
        out = client().containers.run(image_id, ["sh", "-c", _PROBE], entrypoint=[], remove=True,
                                      network_mode="none", user="0:0")
        found, _, cfg = out.decode(errors="replace").partition("---\n")
        kept = venv_keeps(cfg)
        _third_party[image_id] = tuple(Path(d) for d in found.split()
                                       if kept is None or not Path(d).is_relative_to(kept))
    return _third_party[image_id]


def build_base_image(tag: str = BASE_IMAGE, *, force: bool = False, offline: bool | None = None) -> str:
    """Make `tag` exist: reuse it, else FROM a registry's python image, else debootstrap."""
    if not force and image_exists(tag):
        return tag
    if not offline:
        try:
            return _from_registry(tag)
        except Exception as exc:  # no registry: the normal case on these machines
            if offline is False:
                raise SandboxError(f"cannot pull {REGISTRY_BASE}: {exc}") from exc
    return _debootstrap(tag)


def _passwd_lines() -> tuple[str, str]:
    return (f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}:sandbox:/tmp:/bin/sh\n",
            f"sandbox:x:{SANDBOX_GID}:\n")


def _from_registry(tag: str) -> str:
    import io

    c = client()
    c.images.pull(*REGISTRY_BASE.split(":"))
    user, group = _passwd_lines()
    dockerfile = (f"FROM {REGISTRY_BASE}\nRUN echo '{user.strip()}' >>/etc/passwd && "
                  f"echo '{group.strip()}' >>/etc/group && chmod 755 /root && apt-get update && "
                  "apt-get install -y --no-install-recommends git procps && rm -rf /var/lib/apt/lists\n")
    c.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True)
    return tag


def _debootstrap(tag: str) -> str:
    if os.geteuid() != 0:
        raise SandboxError("building the base image offline needs root (debootstrap); run as root")
    debootstrap = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    if not Path(debootstrap).exists():
        raise SandboxError("no registry and no debootstrap: apt-get install debootstrap")
    with tempfile.TemporaryDirectory(prefix="featdel-rootfs-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        cmd = [debootstrap, "--variant=minbase", f"--include={_PACKAGES}", "bookworm",
               str(rootfs), DEBIAN_MIRROR]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise SandboxError(f"debootstrap failed: {(done.stdout + done.stderr).strip()[-300:]}")
        for rel in _TRIM:
            shutil.rmtree(rootfs / rel, ignore_errors=True)
            (rootfs / rel).mkdir(parents=True, exist_ok=True)
        # Paths under /root (a pyenv interpreter, a cache of venvs) are bound in at their host
        # paths; the sandbox uid must be able to walk through the image's empty /root to them.
        (rootfs / "root").chmod(0o755)
        user, group = _passwd_lines()
        with open(rootfs / "etc/passwd", "a") as f:
            f.write(user)
        with open(rootfs / "etc/group", "a") as f:
            f.write(group)
        archive = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(archive), "."],
                       check=True, timeout=600)
        repo, _, version = tag.partition(":")
        client().api.import_image_from_file(
            str(archive), repository=repo, tag=version or "latest",
            changes=["ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8", 'CMD ["/bin/sh"]'])
    return tag


def _add_tree(tar: tarfile.TarFile, path: Path, skip: tuple[str, ...] = ()) -> None:
    """Add path (and 0755 entries for its parents) at its absolute location in the image,
    leaving out entries whose absolute path starts with one of `skip` (kept as empty dirs)."""
    for parent in reversed(path.parents):
        if str(parent) == "/":
            continue
        info = tarfile.TarInfo(str(parent).lstrip("/"))
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)

    def keep(info: tarfile.TarInfo) -> tarfile.TarInfo | None:
        full = "/" + info.name
        return None if any(full.startswith(s + "/") for s in skip) else info

    tar.add(str(path), arcname=str(path).lstrip("/"), recursive=True, filter=keep)


def _prefix_skips(prefix: Path, venv: Path) -> tuple[str, ...]:
    """The interpreter's own site-packages (unless the venv uses it), its test suite and the
    wheels ensurepip bundles: the bulk of a pyenv prefix, and nothing a venv without system
    site-packages imports."""
    cfg = (venv / "pyvenv.cfg").read_text() if (venv / "pyvenv.cfg").exists() else ""
    uses_system = "include-system-site-packages = true" in cfg
    skips = []
    for lib in prefix.glob("lib/python3*"):
        skips += [str(lib / "test"), str(lib / "ensurepip" / "_bundled")]  # the installer's wheels too
        if not uses_system:
            skips.append(str(lib / "site-packages"))
    return tuple(skips)


def _fingerprint(*paths: Path, skip: tuple[str, ...] = ()) -> str:
    digest = hashlib.sha256()
    for root in paths:
        for dirpath, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in skip]
            dirs.sort()
            for name in sorted(files):
                full = os.path.join(dirpath, name)
                st = os.lstat(full)
                digest.update(f"{full}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _layer(parent: str, paths: Sequence[Path], repository: str, tag: str, changes: list[str],
           skip: tuple[str, ...] = ()) -> str:
    name = f"{repository}:{tag}"
    if image_exists(name):
        return name
    c = client()
    box = c.containers.create(parent, command=["true"])
    try:
        with tempfile.TemporaryFile(dir="/var/tmp") as f:
            with tarfile.open(fileobj=f, mode="w") as tar:
                for path in paths:
                    _add_tree(tar, path, skip)
            f.seek(0)
            if not c.api.put_archive(box.id, "/", f):
                raise SandboxError(f"docker refused the archive for {name}")
        box.commit(repository=repository, tag=tag, changes=changes)
    finally:
        box.remove(force=True)
    return name


def build_repo_image(
    env_dir: Path,
    *,
    python_prefix: Path,
    base: str = BASE_IMAGE,
    install_argv: Sequence[str] | None = None,
) -> str:
    """An image holding `python_prefix` and `env_dir` (venv, pytest plugin, ...) at their host
    paths, with `env_dir/src` empty: the tree under test is mounted there, and the original
    checkout must never be part of a task's environment, where a learner could read it.

    Idempotent: the tag is a fingerprint of the files (path, size, mtime) and the base, so a
    second call with nothing changed returns at once. `install_argv`, if given, runs as root in
    `env_dir/src` inside the image (with the network) after the copy, e.g. to add test extras.
    """
    env_dir, python_prefix = Path(env_dir).resolve(), Path(python_prefix).resolve()
    for hidden in ("/tmp", "/var/tmp", "/run"):
        if env_dir.is_relative_to(hidden):
            raise SandboxError(f"{env_dir} is under {hidden}, which is a tmpfs in sandbox containers and "
                               "would hide the image's copy: keep envs elsewhere (e.g. FEATDEL_CACHE=~/.cache/featdel)")
    venv, src = env_dir / "venv", env_dir / "src"
    for need in (venv, src, python_prefix):
        if not need.is_dir():
            raise SandboxError(f"{need} is not a directory: build the environment first")
    build_base_image(base)
    base_id = client().images.get(base).id
    skip = _prefix_skips(python_prefix, venv)
    py_print = _fingerprint(python_prefix, skip=skip)
    py_tag = hashlib.sha256(f"{base_id}{python_prefix}{py_print}{skip}".encode()).hexdigest()[:16]
    python_image = _layer(base, [python_prefix], "featdel-python", py_tag, [], skip)
    # The checkout goes in as an empty directory: the original code must never be part of a
    # task's environment (a learner could read it); the tree under test is mounted there.
    no_src = (str(src),)
    tag = hashlib.sha256(f"{py_tag}{_fingerprint(env_dir, skip=no_src)}{install_argv}".encode()).hexdigest()[:16]
    repository = "featdel-env-" + "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in env_dir.name.lower())
    env = [f"ENV VIRTUAL_ENV={venv} PATH={venv}/bin:/usr/local/bin:/usr/bin:/bin", f"WORKDIR {src}"]
    name = _layer(python_image, [env_dir], repository, tag, env, skip=no_src)
    if install_argv:
        name = _run_and_commit(name, install_argv, cwd=src, repository=repository, tag=tag + "-i")
    return name


def build_node_repo_image(env_dir: Path, *, node: Path, base: str = BASE_IMAGE) -> str:
    """`build_repo_image` for a JavaScript env: the base plus the host's `node` binary and
    `env_dir` (node_modules, reporters) at their host paths, `env_dir/src` empty. Node comes from
    the host, not Debian: bookworm packages Node 18, and the env's lock records the host's node,
    which the baseline ran (its libraries, libstdc++ and glibc, are the base image's Debian 12's).
    A run binds node_modules and the reporters read-only over the image's copies, so an env under
    /tmp (a container's tmpfs) runs the same."""
    env_dir, node = Path(env_dir).resolve(), Path(node).resolve()
    if not node.is_file() or not (env_dir / "node_modules").is_dir():
        raise SandboxError(f"{node} or {env_dir}/node_modules is missing: build the environment first")
    build_base_image(base)
    st = node.stat()
    node_tag = hashlib.sha256(f"{client().images.get(base).id}{node}{st.st_size}{st.st_mtime_ns}".encode()).hexdigest()[:16]
    node_image = _layer(base, [node], "featdel-node", node_tag, [])
    src = str(env_dir / "src")
    tag = hashlib.sha256(f"{node_tag}{_fingerprint(env_dir, skip=(src,))}".encode()).hexdigest()[:16]
    repository = "featdel-env-" + "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in env_dir.name.lower())
    return _layer(node_image, [env_dir], repository, tag, [f"WORKDIR {src}"], skip=(src,))


def _run_and_commit(image: str, argv: Sequence[str], *, cwd: Path, repository: str, tag: str) -> str:
    name = f"{repository}:{tag}"
    if image_exists(name):
        return name
    c = client()
    box = c.containers.run(image, list(argv), working_dir=str(cwd), detach=True, user="0:0")
    try:
        status = box.wait(timeout=1800)
        if status.get("StatusCode") != 0:
            log = box.logs(tail=20).decode(errors="replace")
            raise SandboxError(f"install in {image} failed: {log.strip()[-300:]}")
        box.commit(repository=repository, tag=tag)
    finally:
        box.remove(force=True)
    return name

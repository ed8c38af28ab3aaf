"""Host-side checks and preparation of the directories a sandbox is given (both backends).

In: a `SandboxSpec`. Out: resolved paths, or a one-line `SandboxError` naming the bad one;
`hand_over()`, which makes the writable directories owned by the sandbox uid when we run as
root (bind mounts keep host ownership, and the sandbox must not be root to write them); and
`spec_roots()`, the spec's paths as `Visible` records with what each backend must cover.

Why cover site-packages: a `readonly` interpreter prefix (a pyenv install) carries its own
lib/python3.X/site-packages, hundreds of third-party packages a venv without system
site-packages never imports, and among them copies of code a task deletes. Both backends lay an
empty read-only dir over them unless a readonly venv asks for system site-packages. The wheels
ensurepip bundles (pip's vendors pyparsing, packaging and more) are covered the same way.

Why chown rather than chmod: a world-writable tree would be writable by every local user too.
Symlinks are changed themselves (lchown), never followed, so a repository cannot aim the chown
at a host file. Work directories must be real copies: a hard link shares its owner with the
original file.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes.base import SANDBOX_GID, SANDBOX_UID, SandboxSpec, Visible

# Never handed to the sandbox uid or mounted over inside it.
_SYSTEM = ("/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/proc", "/root",
           "/run", "/sbin", "/sys", "/tmp", "/usr", "/var", "/var/tmp", "/work")
_SYSTEM_TREES = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/sbin", "/sys", "/usr")


def _is_system(path: Path) -> bool:
    text = str(path)
    return text in _SYSTEM or any(text.startswith(t + "/") for t in _SYSTEM_TREES)


def checked_dir(path: Path, what: str) -> Path:
    """An existing directory, resolved, that is not a system directory."""
    resolved = Path(path).resolve()
    if not resolved.is_dir():
        raise SandboxError(f"{what} {path} is not an existing directory")
    if _is_system(resolved):
        raise SandboxError(f"{what} {path} is a system directory; give the sandbox its own folder")
    return resolved


def checked_mount_point(path: Path, what: str = "mount_at") -> Path:
    path = Path(path)
    if not path.is_absolute() or ".." in path.parts:
        raise SandboxError(f"{what} {path} must be an absolute path without '..'")
    if _is_system(path):
        raise SandboxError(f"{what} {path} would hide a system directory; pick another path")
    return path


def checked_readonly(path: Path) -> Path:
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise SandboxError(f"readonly path {path} does not exist")
    if str(resolved) == "/":
        raise SandboxError("readonly path / would expose the whole host; list the folders needed")
    return resolved


def hand_over(path: Path) -> None:
    """chown -R to the sandbox uid when running as root, never following a symlink.

    fwalk opens each directory relative to its parent's fd without following links, so a
    sandbox that swaps a directory for a link to /etc between listing and descent cannot aim
    the chown at a host file."""
    if os.geteuid() != 0:
        return
    uid, gid = SANDBOX_UID, SANDBOX_GID
    try:
        os.chown(path, uid, gid, follow_symlinks=False)
        for _, dirs, files, dir_fd in os.fwalk(path, follow_symlinks=False):
            for name in dirs + files:
                os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        raise SandboxError(f"cannot hand {path} to the sandbox user: {exc}") from exc


def read_untrusted(root: Path, relative: str, limit: int = 64 << 20) -> bytes:
    """Read a file a sandbox wrote under `root` (a writable dir the host made) without following
    a symlink at any step below root, blocking on a FIFO, or reading more than `limit` bytes.

    A sandbox owns what it writes: a report that is a link to /root/.ssh/id_rsa would otherwise
    be read by the pipeline as root and copied into a dataset."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise SandboxError(f"{relative!r} must be a relative path inside {root} without '..'")
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY)]
    try:
        for part in parts[:-1]:
            fds.append(os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise SandboxError(f"{root / relative} is not a regular file")
        with os.fdopen(os.dup(fds[-1]), "rb") as f:
            return f.read(limit)
    except OSError as exc:
        raise SandboxError(f"cannot read {root / relative} safely: {exc.strerror}") from exc
    finally:
        for fd in fds:
            os.close(fd)


Bind = tuple[Path, Path]  # (host source, resolved; destination inside, as the caller spelled it)


Resolved = tuple[Path, Path, tuple[Bind, ...], tuple[Bind, ...]]


def resolve(spec: SandboxSpec) -> Resolved:
    """(workdir, mount_at, readonly binds, writable binds), checked, nothing changed on disk.

    A bind's destination is the caller's absolute path, not the resolved one, so a venv reached
    through a symlinked cache dir still sits where its scripts and .pth files point."""
    workdir = checked_dir(spec.workdir, "workdir")
    mount_at = checked_mount_point(Path(spec.mount_at)) if spec.mount_at else Path(os.path.abspath(spec.workdir))
    checked_mount_point(mount_at)
    readonly = tuple((checked_readonly(p), Path(os.path.abspath(p))) for p in spec.readonly)
    writable = tuple((checked_dir(p, "writable path"), checked_mount_point(Path(os.path.abspath(p)), "writable path"))
                     for p in spec.writable)
    return workdir, mount_at, readonly, writable


def prepare(spec: SandboxSpec) -> Resolved:
    """`resolve(spec)`, then the writable dirs handed over to the sandbox uid."""
    workdir, mount_at, readonly, writable = resolve(spec)
    for path in (workdir, *(src for src, _ in writable)):
        hand_over(path)
    return workdir, mount_at, readonly, writable


def is_python_prefix(path: Path) -> bool:
    """An interpreter installation (sys.base_prefix), recognised by its standard library."""
    return any(Path(path).glob("lib*/python3*/os.py"))


def site_dirs(prefix: Path) -> set[Path]:
    """A prefix's third-party package dirs, resolved: lib*/python3.X/site-packages and
    dist-packages, Debian's lib/python3/dist-packages, and the wheels ensurepip installs from
    (lib*/python3.X/ensurepip/_bundled: pip and setuptools, which vendor other libraries;
    nothing a test run imports)."""
    kinds = ("site-packages", "dist-packages", "ensurepip/_bundled")
    return {d.resolve() for kind in kinds for d in Path(prefix).glob(f"lib*/python3*/{kind}") if d.is_dir()}


def venv_keeps(cfg_text: str) -> Path | None:
    """The prefix a venv's pyvenv.cfg says it uses the site-packages of (`include-system-site-
    packages = true`; the prefix is its `home`'s parent), else None."""
    values = {}
    for line in cfg_text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip().lower()] = value.strip()
    if values.get("include-system-site-packages", "").lower() == "true" and values.get("home"):
        return Path(values["home"]).parent
    return None


def system_site_users(readonly: tuple[Path, ...]) -> set[Path]:
    """Prefixes whose site-packages a readonly venv uses: those stay visible."""
    cfgs = (Path(src) / "pyvenv.cfg" for src in readonly)
    return {p.resolve() for cfg in cfgs if cfg.is_file() and (p := venv_keeps(cfg.read_text(errors="replace")))}


def covered(root: Path, kept: set[Path] = frozenset()) -> tuple[Path, ...]:
    """Site dirs strictly inside `root` (resolved) of any prefix at or above it, except those of
    `kept` prefixes. A root that *is* a site dir was asked for by name and stays visible."""
    found: set[Path] = set()
    for prefix in (root, *root.parents):
        if prefix not in kept and is_python_prefix(prefix):
            found.update(d for d in site_dirs(prefix) if d != root and d.is_relative_to(root))
    return tuple(sorted(found))


def spec_roots(resolved: Resolved, sealed: tuple[Bind, ...] = ()) -> list[Visible]:
    """The spec's own paths as a sandbox shows them: work dir, readonly (less what `covered`
    hides), writable and sealed paths (`sealed_binds`; writable, though not listable)."""
    workdir, mount_at, readonly, writable = resolved
    kept = system_site_users(tuple(src for src, _ in readonly))
    return [Visible(host=workdir, inside=mount_at, writable=True, system=False),
            *(Visible(host=src, inside=dest, writable=False, system=False, hidden=covered(src, kept))
              for src, dest in readonly),
            *(Visible(host=src, inside=dest, writable=True, system=False) for src, dest in (*writable, *sealed))]


def sealed_binds(spec: SandboxSpec, *, seal: bool = True) -> tuple[Bind, ...]:
    """The spec's sealed dirs, checked and (unless `seal=False`, for a dry look) made 0733 (write
    and enter, never list), never handed over: the sandbox uid can create a file whose name it
    knows but cannot see what is there."""
    binds = []
    for p in spec.sealed:
        src = checked_dir(p, "sealed path")
        if seal:
            src.chmod(0o733)
        binds.append((src, checked_mount_point(Path(os.path.abspath(p)), "sealed path")))
    return tuple(binds)


def venv_of(program: str) -> tuple[Path, ...]:
    """(venv, interpreter prefix) when program is a venv's bin/ entry, else (): what a
    `venv/bin/python -m pytest` needs to see read-only."""
    path = Path(program).expanduser()
    if not path.is_absolute() or path.parent.name != "bin":
        return ()
    venv = Path(os.path.abspath(path.parent.parent))
    cfg = venv / "pyvenv.cfg"
    if not cfg.is_file():
        return ()
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            return (venv, Path(value.strip()).parent)
    return (venv,)

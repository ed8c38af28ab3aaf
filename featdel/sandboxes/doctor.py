"""`featdel sandbox doctor`: what is available for sandboxing here, what is missing, how to fix it.

In: nothing (it probes the machine). Out: a list of `Check`s, each with a status, what was found
and, when not ok, the one line that fixes it. The local and docker checks end with a real smoke
run (`true` in a sandbox), so "ok" means a command actually ran isolated, not that a binary exists.

It also says what the local sandbox shows of the host (`rootfs.system_roots()`) and searches
those roots for Python packages (site-packages, *.dist-info, a package directly under a root):
third-party code there is code a learner could copy, so finding any is a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from featdel.sandboxes.base import Visible


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    name: str
    ok: bool
    found: str
    fix: str = ""
    required: bool = True  # False: only some features need it (docker, debootstrap)


def _version(argv: list[str]) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (done.stdout or done.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "present"


def _smoke(backend_name: str) -> tuple[bool, str]:
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import Limits, SandboxSpec, get_backend

    try:
        backend = get_backend(backend_name)
        with tempfile.TemporaryDirectory(prefix="featdel-doctor-") as tmp:
            with backend.open(SandboxSpec(workdir=Path(tmp), limits=Limits(timeout_s=60))) as sb:
                r = sb.run(["id", "-u"])
        if not r.ok:
            return False, f"`id -u` failed: {r.stderr.strip()[:200]}"
        return True, f"ran `id -u` as uid {r.stdout.strip()}"
    except SandboxError as exc:
        return False, str(exc)


# Packages of the standard library that sys.stdlib_module_names leaves out.
_STDLIB_EXTRA = frozenset({"test", "__phello__"})
_PACKAGE_SUFFIXES = (".dist-info", ".egg-info", ".egg", ".whl")


def python_packages(roots: list[Visible]) -> list[Path]:
    """Python package dirs in `roots` (`Visible`s): site-packages and dist-packages dirs,
    *.dist-info/*.egg-info/wheels, and a dir with __init__.py directly under a root (one of the
    standard library's own, under a stdlib root, excepted). Links are not followed: a link to a
    path no root shows dangles inside the sandbox."""
    stdlib = set(sys.stdlib_module_names) | _STDLIB_EXTRA
    found: list[Path] = []
    for root in roots:
        is_stdlib = (root.host / "os.py").is_file()
        for dirpath, dirs, files in os.walk(root.host):
            here = Path(dirpath)
            dirs[:] = [d for d in dirs if here / d not in root.hidden and not (here / d).is_symlink()]
            for name in dirs + files:
                path = here / name
                if name in ("site-packages", "dist-packages") or name.endswith(_PACKAGE_SUFFIXES):
                    found.append(path)
                elif here == root.host and name in dirs and (path / "__init__.py").is_file():
                    if not (is_stdlib and name in stdlib):
                        found.append(path)
    return sorted(found)


def _local_roots() -> list[Check]:
    from featdel.sandboxes.rootfs import system_roots

    roots = system_roots()
    etc = [r for r in roots if r.inside.is_relative_to("/etc")]
    out = [Check(name="local sees", ok=True,
                 found=f"{r.inside} (read-only)" + (f", less {len(r.hidden)} site dir(s)" if r.hidden else ""))
           for r in roots if r not in etc]
    out.append(Check(name="local sees", ok=True, found=f"/etc: {', '.join(str(r.inside.relative_to('/etc')) for r in etc)}"))
    packages = python_packages(roots)
    shown = ", ".join(map(str, packages[:3])) + (f" and {len(packages) - 3} more" if len(packages) > 3 else "")
    out.append(Check(name="python packages", ok=not packages,
                     found=f"{len(packages)} in the local sandbox's system dirs: {shown}" if packages
                     else "none in the local sandbox's system dirs",
                     fix="a learner could read these copies: stop showing them (featdel/sandboxes/rootfs.py)"))
    return out


def checks(*, smoke: bool = True) -> list[Check]:
    from featdel.sandboxes import images
    from featdel.sandboxes.cgroups import cgroup_version

    out: list[Check] = []
    bwrap = shutil.which("bwrap")
    out.append(Check(name="bubblewrap", ok=bwrap is not None,
                     found=_version([bwrap, "--version"]) if bwrap else "not installed",
                     fix="sudo apt-get install -y bubblewrap  (`make demo` and `make test` do it as root: .ci/setup)"))
    for tool in ("setpriv", "prlimit"):
        path = shutil.which(tool)
        out.append(Check(name=tool, ok=path is not None, found=path or "not installed",
                         fix="apt-get install util-linux"))
    version = cgroup_version()
    out.append(Check(name="cgroups", ok=version is not None or os.geteuid() != 0,
                     found=f"{version} (memory, pids, cpu limits; kill-all)" if version
                     else "not writable: limits fall back to prlimit (per-uid process count, address space)",
                     fix="run as root with /sys/fs/cgroup writable", required=False))
    userns = Path("/proc/sys/user/max_user_namespaces")
    if os.geteuid() != 0:
        n = int(userns.read_text()) if userns.exists() else 0
        out.append(Check(name="user namespaces", ok=n > 0, found=f"max_user_namespaces={n}",
                         fix="sysctl -w user.max_user_namespaces=15000"))
    if smoke and bwrap:
        ok, found = _smoke("local")
        out.append(Check(name="local sandbox", ok=ok, found=found, fix="see the failures above"))
    out += _local_roots()
    reason = images.engine_reason()
    out.append(Check(name="docker engine", ok=reason is None, found="reachable" if reason is None else reason,
                     fix="dockerd >/var/log/dockerd.log 2>&1 &  (or systemctl start docker)", required=False))
    if reason is None:
        have = images.image_exists(images.BASE_IMAGE)
        out.append(Check(name="base image", ok=have, found=images.BASE_IMAGE if have else "not built",
                         fix="featdel sandbox build --base-only", required=False))
        if have and smoke:
            ok, found = _smoke("docker")
            out.append(Check(name="docker sandbox", ok=ok, found=found, fix="see above", required=False))
    deb = shutil.which("debootstrap") or (Path("/usr/sbin/debootstrap").exists() and "/usr/sbin/debootstrap")
    out.append(Check(name="debootstrap", ok=bool(deb), found=str(deb) if deb else "not installed",
                     fix="sudo apt-get install -y debootstrap  (builds the base image without a registry; `make test` does it as root)",
                     required=False))
    return out

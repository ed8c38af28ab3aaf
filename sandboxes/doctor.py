"""`featdel sandbox doctor`: what is available for sandboxing here, what is missing, how to fix it.

In: nothing (it probes the machine). Out: a list of `Check`s, each with a status, what was found
and, when not ok, the one line that fixes it. The local and docker checks end with a real smoke
run (`true` in a sandbox), so "ok" means a command actually ran isolated, not that a binary exists.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


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
    from featdel.errors import SandboxError
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


def checks(*, smoke: bool = True) -> list[Check]:
    from featdel.sandboxes import images
    from featdel.sandboxes.cgroups import cgroup_version

    out: list[Check] = []
    bwrap = shutil.which("bwrap")
    out.append(Check(name="bubblewrap", ok=bwrap is not None,
                     found=_version([bwrap, "--version"]) if bwrap else "not installed",
                     fix="apt-get install bubblewrap"))
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
                     fix="apt-get install debootstrap (builds the base image without a registry)",
                     required=False))
    return out

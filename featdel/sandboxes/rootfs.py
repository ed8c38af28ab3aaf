"""The local sandbox's root filesystem: which host system paths a command sees, and why.

In: the host. Out: `system_roots()`, one read-only `Visible` (system=True) per host directory
or /etc file the local backend binds. Everything else of the sandbox's root is made up inside
(fresh /dev, /proc, /tmp, /run, passwd, the /bin -> usr/bin links) and holds no host file.

Why not all of /usr: a host's /usr is not neutral ground. Debian keeps system Python packages in
/usr/lib/python3/dist-packages and wheels in /usr/share/python-wheels, /usr/local has pip's, and
SDKs vendor well-known libraries under /usr/lib (a cloud SDK here). Code under test could read
those copies and recover deleted code. So the root holds only what a process needs: programs
(/usr/bin, /usr/sbin), the C libraries and loader (the multiarch dir that holds libc,
/usr/lib64), locales, TLS roots, time zones, and Debian Python's standard library (so the
`python3` tool works) with any site dir in it covered.
"""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

from featdel.sandboxes.base import Visible
from featdel.sandboxes.hostpaths import covered

# Needed by any process: tools, the loader's home, locale data (LANG=C.UTF-8), TLS config and
# the CA files /etc/ssl/certs links into, and the zone database zoneinfo reads.
USR_DIRS = ("/usr/bin", "/usr/sbin", "/usr/lib64", "/usr/lib/locale", "/usr/lib/ssl",
            "/usr/share/ca-certificates", "/usr/share/zoneinfo")
# Top-level names that merged-/usr hosts make links into /usr; a real directory is bound whole.
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# What a Python test suite or a pip install needs from /etc; keys, shadow, docker configs stay out.
ETC_FILES = ("alternatives", "ca-certificates", "ca-certificates.conf", "debian_version",
             "gai.conf", "host.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
             "localtime", "mime.types", "nsswitch.conf", "os-release", "pip.conf", "protocols",
             "resolv.conf", "services", "ssl/certs", "ssl/openssl.cnf", "timezone")


def library_dirs() -> list[Path]:
    """The system C library directories: every /usr/lib/<triplet> holding libc (more than one on
    a multilib host), and this interpreter's MULTIARCH dir. /usr/lib64 is in USR_DIRS."""
    found = {p.parent for p in Path("/usr/lib").glob("*/libc.so.6")}
    arch = sysconfig.get_config_var("MULTIARCH")
    if arch and Path("/usr/lib", arch).is_dir():
        found.add(Path("/usr/lib", arch))
    return sorted(found)


def debian_stdlibs() -> list[Path]:
    """/usr/lib/python3.X of the system Python: its standard library only. Never
    /usr/lib/python3 (dist-packages), which holds the distribution's third-party packages."""
    return sorted(p.parent for p in Path("/usr/lib").glob("python3.*/os.py"))


def _top_level() -> list[Path]:
    return [Path("/", top) for top in TOP_LEVEL
            if not Path("/", top).is_symlink() and Path("/", top).is_dir()]


def top_level_links() -> list[tuple[str, Path]]:
    """(link target, path) of the top-level links to recreate inside (/bin -> usr/bin)."""
    return [(os.readlink(p), p) for p in (Path("/", top) for top in TOP_LEVEL) if p.is_symlink()]


def system_roots() -> list[Visible]:
    """Every host path the local backend binds for itself, read-only, that exists here."""
    # Only a stdlib dir or a real top-level /lib can hold a prefix's site dir; the others are
    # never looked into (globbing /usr/bin for one costs more than a whole sandboxed command).
    may_hold_site = {*_top_level(), *debian_stdlibs()}
    dirs = [*_top_level(), *(Path(d) for d in USR_DIRS), *library_dirs(), *debian_stdlibs()]
    roots: list[Visible] = []
    for path in dict.fromkeys(dirs):
        if path.is_dir():
            host = path.resolve()
            hidden = covered(host) if path in may_hold_site else ()
            roots.append(Visible(host=host, inside=path, writable=False, system=True, hidden=hidden))
    for name in ETC_FILES:
        path = Path("/etc", name)
        if path.exists():  # a bind follows links: /etc/localtime shows its zone file's content
            roots.append(Visible(host=path.resolve(), inside=path, writable=False, system=True))
    return roots


def libc_visible(roots: list[Visible]) -> bool:
    """Whether the roots hold a C library a program can load (else nothing will start)."""
    return any((v.host / "libc.so.6").exists() for v in roots if v.system)

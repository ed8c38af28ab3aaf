"""Helpers for the sandbox tests (imported by tests/test_sandbox_*.py; not a pytest conftest).

`sandbox_backend(name)` gives a ready backend or skips/fails: a missing Docker engine skips the
docker tests on a laptop, but under CI=true it fails them, so a green CI never hides a missing
engine. Host-side probes (a loopback server, a secret file, a unix socket, planted copies of a
package) are real: each test first proves the probe works from the host, so it would fail if the
isolation were removed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(condition: bool, reason: str) -> None:
    """Skip when a prerequisite is missing, except in CI, where it is a failure."""
    if condition:
        return
    if in_ci():
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def docker_base_image() -> str:
    """The offline base image, built once per machine (about a minute) and reused by name."""
    from featdel.sandboxes import images

    need(images.engine_reason() is None, f"no Docker engine: {images.engine_reason()}")
    return images.build_base_image()  # featdel-base:bookworm-2, shared with `featdel sandbox build`


def sandbox_backend(name: str):
    from featdel.core.errors import SandboxError
    from featdel.sandboxes import get_backend

    if name == "docker":
        image = docker_base_image()
        backend = get_backend("docker")
        backend.default_image = image
        return backend
    try:
        return get_backend(name)
    except SandboxError as exc:
        need(False, str(exc))


@contextmanager
def loopback_server() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1 that accepts connections; yields its port."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    srv.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        srv.close()


@contextmanager
def unix_server(path: Path) -> Iterator[Path]:
    """A listening unix socket any local user may connect to (like a group-open docker.sock)."""
    srv = socket.socket(socket.AF_UNIX)
    srv.bind(str(path))
    os.chmod(path, 0o666)
    srv.listen(16)
    try:
        yield path
    finally:
        srv.close()
        path.unlink(missing_ok=True)


def as_uid(uid: int, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run argv on the host, unsandboxed, as the host uid the sandbox's commands have (uid as
    root; the caller's own uid otherwise): what they could do without the isolation."""
    prefix = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups"] if os.geteuid() == 0 else []
    return subprocess.run([*prefix, *argv], capture_output=True, text=True, timeout=30)


def processes_with(marker: str) -> list[int]:
    """Host pids whose command line contains marker."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(entry.path, "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(entry.name))
    return found


def marker() -> str:
    return f"featdel-probe-{uuid.uuid4().hex[:10]}"


@contextmanager
def planted_copies() -> Iterator[dict[str, Path]]:
    """Copies of a package where a sandbox that bound all of /usr, or a whole interpreter
    prefix, would show them: Debian's dist-packages (`dist`, a package), an SDK's vendored
    tree under /usr/lib (`sdk`), the interpreter prefix's site-packages (`site`, a module).
    Each file holds `SECRET`. Needs root; every file and directory made is removed afterwards."""
    need(os.geteuid() == 0, "planting files under /usr and the interpreter prefix needs root")
    tag = uuid.uuid4().hex[:8]
    site = next(Path(sys.base_prefix).glob("lib/python3*/site-packages"))
    files = {
        "dist": Path("/usr/lib/python3/dist-packages", f"featdel_planted_{tag}", "__init__.py"),
        "sdk": Path(f"/usr/lib/featdel-planted-sdk-{tag}", "vendored", f"featdel_planted_sdk_{tag}.py"),
        "site": site / f"featdel_planted_site_{tag}.py",
    }
    made: list[Path] = []  # the topmost directory each plant had to create
    try:
        for path in files.values():
            missing = [d for d in path.parents if not d.exists()]
            if missing:
                made.append(missing[-1])
            path.parent.mkdir(parents=True, exist_ok=True)
            for d in missing:
                d.chmod(0o755)
            path.write_text(f"SECRET = {PLANTED_SECRET!r}\n")
            path.chmod(0o644)
        yield files
    finally:
        for path in files.values():
            path.unlink(missing_ok=True)
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


PLANTED_SECRET = "featdel-planted-deleted-code"


def module_name(path: Path) -> str:
    """The import name of a planted file (a package's __init__.py or a module)."""
    return path.parent.name if path.name == "__init__.py" else path.stem

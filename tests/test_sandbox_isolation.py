"""Invariant: code in a sandbox (local bwrap or docker) cannot reach the host's loopback, read a
host file outside its work directory, import the system's third-party Python packages (where
copies of deleted code may sit), reach a Docker socket, exhaust the host's processes or memory,
outlive its timeout, flood the caller with output, or run as root.

Each test first shows the probe works from the host (the server listens, the secret is readable
by the sandbox uid, the socket accepts), so it fails if the isolation is removed. The same tests
run on both backends; the docker ones need an engine (CI starts one).
"""

from __future__ import annotations

import os
import socket
import textwrap
import time
import uuid
from pathlib import Path

import pytest
from conftest_sandbox import (
    as_uid,
    loopback_server,
    marker,
    module_name,
    planted_copies,
    processes_with,
    sandbox_backend,
    unix_server,
)

from featdel.sandboxes import Limits, MiB, SandboxSpec
from featdel.sandboxes.base import SANDBOX_UID

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


@pytest.fixture(params=BACKENDS)
def sandbox(request, tmp_path):
    backend = sandbox_backend(request.param)
    work = tmp_path / "work"
    work.mkdir()
    limits = Limits(timeout_s=60, memory_bytes=256 * MiB, pids=64, output_cap_bytes=64 * 1024)
    with backend.open(SandboxSpec(workdir=work, limits=limits)) as sb:
        yield sb


def py(code: str) -> list[str]:
    return ["python3", "-c", textwrap.dedent(code)]


def test_host_loopback_is_unreachable(sandbox):
    with loopback_server() as port:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()  # it really listens
        r = sandbox.run(py(f"""
            import socket
            try:
                socket.create_connection(("127.0.0.1", {port}), timeout=2)
                print("CONNECTED")
            except OSError as e:
                print("refused", e)
        """))
    assert r.exit_code == 0, r.stderr
    assert "refused" in r.stdout and "CONNECTED" not in r.stdout


def test_host_file_outside_workdir_is_unreadable(sandbox):
    folder = Path("/var/tmp") / f"featdel-secret-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o755)
    secret = folder / "secret.txt"
    secret.write_text("hunter2\n")
    secret.chmod(0o644)
    try:
        assert as_uid(SANDBOX_UID, ["cat", str(secret)]).stdout == "hunter2\n"  # only isolation hides it
        r = sandbox.run(["cat", str(secret)])
        listing = sandbox.run(["ls", "/root", "/home", "/work"])
    finally:
        secret.unlink()
        folder.rmdir()
    assert r.exit_code != 0 and "hunter2" not in r.stdout
    assert "main" not in listing.stdout  # /work/main exists on the host


def test_system_python_packages_cannot_be_imported(sandbox):
    """Debian's python3 imports from dist-packages: a package planted there on the host (local),
    or the image's own pip (docker). Outside the sandbox it imports; inside it does not."""
    from featdel.sandboxes.docker_backend import DockerSandbox

    probe = "import {0}; print('IMPORTED', {0}.__file__)"
    if isinstance(sandbox, DockerSandbox):
        from featdel.sandboxes.images import client

        seen = client().containers.run(sandbox.image, ["python3", "-c", probe.format("pip")], remove=True,
                                       network_mode="none", user=f"{SANDBOX_UID}:{SANDBOX_UID}").decode()
        r = sandbox.run(["python3", "-c", probe.format("pip")])
    else:
        with planted_copies() as files:
            name = module_name(files["dist"])
            seen = as_uid(SANDBOX_UID, ["/usr/bin/python3", "-c", probe.format(name)]).stdout
            r = sandbox.run(["python3", "-c", probe.format(name)])
    assert "IMPORTED" in seen  # only the isolation hides it
    assert r.exit_code != 0 and "IMPORTED" not in r.stdout and "ModuleNotFoundError" in r.stderr


def test_docker_socket_is_unreachable(sandbox):
    path = Path("/run") / f"featdel-test-{uuid.uuid4().hex[:8]}.sock"
    with unix_server(path):
        probe = "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('CONNECTED')"
        assert "CONNECTED" in as_uid(SANDBOX_UID, ["/usr/bin/python3", "-c", probe, str(path)]).stdout
        results = [sandbox.run(["python3", "-c", probe, p])
                   for p in (str(path), "/run/docker.sock", "/var/run/docker.sock")]
    for r in results:
        assert r.exit_code != 0 and "CONNECTED" not in r.stdout


def test_process_limit_stops_a_fork_bomb_and_the_host_is_unharmed(sandbox):
    counted = sandbox.run(py("""
        import os, time
        n = 0
        for _ in range(300):
            try:
                if os.fork() == 0:
                    time.sleep(30); os._exit(0)
                n += 1
            except OSError:
                break
        print(n)
    """))
    assert counted.ok, counted.stderr
    assert int(counted.stdout) < 64  # 300 without the limit
    tag = marker()
    bomb = sandbox.run(["sh", "-c", "b() { b | b & }; b; sleep 100", tag], limits=Limits(timeout_s=3, pids=64))
    assert bomb.timed_out or bomb.exit_code != 0
    time.sleep(0.2)
    assert processes_with(tag) == []
    assert sandbox.run(["true"]).ok  # the sandbox and the host still start processes


def test_memory_hog_is_killed(sandbox):
    r = sandbox.run(py("""
        chunks = []
        for _ in range(64):
            chunks.append(bytearray(32 << 20))  # 2 GiB in all, pages touched by zero-filling
        print("SURVIVED")
    """))
    assert r.killed and r.exit_code == 137 and "SURVIVED" not in r.stdout


def test_infinite_loop_ends_at_timeout_with_nothing_left(sandbox):
    tag = marker()
    loop = f"sh -c 'while :; do sleep 1; done' {tag}-child & setsid sh -c 'while :; do sleep 1; done' {tag}-daemon & while :; do :; done"
    start = time.monotonic()
    r = sandbox.run(["sh", "-c", loop, tag], limits=Limits(timeout_s=1.5))
    assert r.timed_out and r.exit_code == 124
    assert time.monotonic() - start < 10
    assert processes_with(tag) == []


def test_output_flood_is_capped(sandbox):
    r = sandbox.run(py("""
        import sys
        block = b"x" * 65536
        for _ in range(320):
            sys.stdout.buffer.write(block)
        sys.stderr.write("done")
    """))
    assert r.ok, r.stderr[-500:]
    assert r.stdout_truncated and len(r.stdout.encode()) <= 64 * 1024
    assert r.stderr == "done" and not r.stderr_truncated


def test_command_does_not_run_as_root(sandbox):
    r = sandbox.run(["sh", "-c", "id -u; grep CapEff /proc/self/status; touch made"])
    assert r.ok, r.stderr
    uid, caps = r.stdout.split("\n", 1)
    assert uid != "0" and caps.split()[-1] == "0000000000000000"
    made = Path(sandbox.spec.workdir) / "made"
    assert os.stat(made).st_uid != 0  # on the host too, not just inside a user namespace


@pytest.mark.parametrize("name", BACKENDS)
def test_cpu_limit_throttles_a_busy_loop(name, tmp_path):
    backend = sandbox_backend(name)
    limits = Limits(timeout_s=30, cpus=0.25)
    burn = py("""
        import time
        wall, cpu = time.monotonic(), time.process_time()
        while time.monotonic() - wall < 1.5:
            pass
        print(round((time.process_time() - cpu) / (time.monotonic() - wall), 2))
    """)
    with backend.open(SandboxSpec(workdir=tmp_path, limits=limits)) as sb:
        r = sb.run(burn)
    assert r.ok, r.stderr
    assert float(r.stdout) < 0.45  # unthrottled it is close to 1.0 (one full core)

"""Invariant: a docker sandbox is one warm container reused by exec, whose root is read-only,
and whose reset() leaves no process of the last candidate and an empty /tmp; a per-repo image
carries the interpreter, venv and checkout at their host paths, so the venv's python imports the
candidate mounted over the checkout with no host path bound in; building it twice is a no-op.
Third-party Python code is unreadable in a container: the image's own dirs (Debian's
dist-packages, /usr/share/python-wheels, /usr/local's site-packages) and a bound interpreter
prefix's site-packages are covered by empty read-only tmpfs, while a plain container of the same
image and the host read them; `visible()` lists only the bind mounts.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest_sandbox import PLANTED_SECRET, docker_base_image, planted_copies, sandbox_backend

from featdel.core.errors import SandboxError
from featdel.sandboxes import Limits, SandboxSpec

pytestmark = pytest.mark.docker


@pytest.fixture
def docker_sb(tmp_path):
    backend = sandbox_backend("docker")
    with backend.open(SandboxSpec(workdir=tmp_path, limits=Limits(timeout_s=60))) as sb:
        yield sb


def test_reset_keeps_a_work_dir_mounted_under_tmp(docker_sb, tmp_path):
    (tmp_path / "keep.txt").write_text("candidate file")
    docker_sb.run(["touch", "/tmp/scratch"])
    docker_sb.reset()
    assert (tmp_path / "keep.txt").read_text() == "candidate file"
    assert docker_sb.run(["cat", str(tmp_path / "keep.txt")]).stdout == "candidate file"


def test_warm_container_is_reused_and_reset_between_candidates(tmp_path):
    backend = sandbox_backend("docker")
    with backend.open(SandboxSpec(workdir=tmp_path, mount_at=Path("/sandbox/work"))) as sb:
        _reused_and_reset(sb)


def _reused_and_reset(docker_sb):
    first = docker_sb._container.id
    r = docker_sb.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 & touch /tmp/left-over; echo started"])
    assert r.ok and r.stdout.strip() == "started"
    assert docker_sb.run(["sh", "-c", "ls /tmp"]).stdout.split() == ["left-over"]
    docker_sb.reset()
    procs = docker_sb.run(["sh", "-c", "for d in /proc/[0-9]*; do cat $d/comm; done"]).stdout.split()
    assert "sleep" in procs and procs.count("sleep") == 1  # only the container's own sleep
    assert docker_sb.run(["ls", "/tmp"]).stdout == ""
    assert docker_sb._container.id == first


def test_a_command_runc_could_not_start_is_tried_once_more_after_a_sweep(docker_sb):
    """What one command leaves behind (a fork bomb's processes or zombies) can make runc fail to
    start the next: `OCI runtime exec failed`. That is not the next command's failure, so the
    container is swept (every leftover killed) and the command tried once more; failing twice is
    the sandbox's failure. Here the command says so itself, its first time only; a sleeper left
    by an earlier command shows that the sweep ran."""
    assert docker_sb.run(["sh", "-c", "sleep 300 >/dev/null 2>&1 &"]).ok
    said = "OCI runtime exec failed: exec failed: unable to start container process: read init-p: reset"
    once = ("if [ -e /tmp/tried ]; then for d in /proc/[0-9]*; do cat $d/comm; done; exit 0; fi; "
            f"touch /tmp/tried; echo '{said}'; exit 126")
    r = docker_sb.run(["sh", "-c", once])
    assert r.ok and r.stdout.split().count("sleep") == 1, r  # the container's own sleep only
    with pytest.raises(SandboxError, match="docker could not start the command"):
        docker_sb.run(["sh", "-c", f"echo '{said}'; exit 126"])


def test_root_is_read_only_and_tmp_is_writable(docker_sb):
    assert docker_sb.run(["touch", "/usr/evil"]).exit_code != 0
    assert docker_sb.run(["touch", "/etc/evil"]).exit_code != 0
    assert docker_sb.run(["touch", "/tmp/fine"]).ok
    nets = docker_sb.run(["cat", "/proc/net/dev"]).stdout
    assert "eth0" not in nets and "lo:" in nets


def test_repo_image_holds_the_env_at_host_paths(tmp_path):
    base = docker_base_image()
    from featdel.sandboxes.docker_backend import DockerBackend
    from featdel.sandboxes.images import build_repo_image

    # Not under /tmp: the container's tmpfs /tmp would hide the image's copy.
    env = Path.home() / ".cache" / f"featdel-test-{uuid.uuid4().hex[:8]}" / "envs" / "demo"
    image = None
    try:
        src = env / "src"
        src.mkdir(parents=True)
        (src / "mod.py").write_text("WHO = 'original'\n")
        venv = env / "venv"
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
        site = next(venv.glob("lib/python3*/site-packages"))
        (site / "__editable__.demo.pth").write_text(f"{src}\n")
        image = build_repo_image(env, python_prefix=Path(sys.base_prefix), base=base)
        start = time.monotonic()
        assert build_repo_image(env, python_prefix=Path(sys.base_prefix), base=base) == image
        assert time.monotonic() - start < 10
        cand = tmp_path / "cand"
        cand.mkdir()
        (cand / "mod.py").write_text("WHO = 'candidate'\n")
        with DockerBackend().open(SandboxSpec(workdir=cand, mount_at=src, image=image)) as sb:
            r = sb.run([str(venv / "bin" / "python"), "-c", "import mod, sys; print(mod.WHO, sys.version_info[:2])"])
        assert r.ok, r.stderr
        assert r.stdout.split()[0] == "candidate"
        assert image.startswith("featdel-env-demo:")
        from featdel.sandboxes.images import client

        listing = client().containers.run(image, ["ls", "-A", str(src)], remove=True, network_disabled=True)
        assert listing.strip() == b"", "the original checkout must not be inside the image"
        with pytest.raises(SandboxError, match="tmpfs"):
            build_repo_image(tmp_path, python_prefix=Path(sys.base_prefix), base=base)
    finally:
        shutil.rmtree(env.parent.parent, ignore_errors=True)
        if image is not None:  # its path is unique to this test: nobody will reuse it
            from featdel.sandboxes.images import client

            client().images.remove(image, force=True)


def test_cli_build_base_only_reuses_the_base_image():
    import typer
    from typer.testing import CliRunner

    from featdel.cli.sandbox import sandbox_app

    base = docker_base_image()
    app = typer.Typer()
    app.add_typer(sandbox_app, name="sandbox")
    r = CliRunner().invoke(app, ["sandbox", "build", "--base-only"])
    assert r.exit_code == 0 and f"base image: {base}" in r.stdout


def test_containers_of_a_killed_process_are_pruned(tmp_path):
    import os
    import signal

    from featdel.sandboxes.docker_backend import LABEL, prune_orphans
    from featdel.sandboxes.images import client

    base = docker_base_image()
    code = ("import sys, time; from pathlib import Path; from featdel.sandboxes import get_backend, SandboxSpec\n"
            f"sb = get_backend('docker').open(SandboxSpec(workdir=Path('{tmp_path}'), image='{base}'))\n"
            "print(sb._container.id, flush=True); time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    cid = proc.stdout.readline().strip()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert cid in [c.id for c in client().containers.list(filters={"label": LABEL})]  # it outlived its owner
    prune_orphans()
    assert cid not in [c.id for c in client().containers.list(all=True, filters={"label": LABEL})]


def test_third_party_python_is_unreadable_in_a_container(tmp_path):
    from featdel.sandboxes.images import client

    base = docker_base_image()
    plain = client().containers.run(base, ["sh", "-c", "ls /usr/lib/python3/dist-packages /usr/share/python-wheels; "
                                          "python3 -c 'import pip; print(\"IMPORTED\")'"],
                                    remove=True, network_mode="none", user="65532:65532").decode()
    assert "pip" in plain and ".whl" in plain and "IMPORTED" in plain  # the image carries them
    prefix = Path(sys.base_prefix)
    with planted_copies() as files:
        site = files["site"]
        assert PLANTED_SECRET in site.read_text()
        with sandbox_backend("docker").open(SandboxSpec(workdir=tmp_path, image=base, readonly=(prefix,))) as sb:
            hidden = " ".join(map(str, sb.image_hidden))
            listing = sb.run(["sh", "-c", f"ls -A {hidden} {site.parent}"])
            imported = sb.run(["python3", "-c", "import pip; print('IMPORTED')"])
            read = sb.run(["cat", str(site), "/usr/share/python-wheels/" + next(n for n in plain.split() if n.endswith(".whl"))])
            tools = sb.run([str(prefix / "bin" / "python3"), "-c", "import json, sqlite3, ssl; print('ok')"])
            written = sb.run(["touch", "/usr/lib/python3/dist-packages/x"])
            visible = sb.visible()
    assert {"/usr/lib/python3/dist-packages", "/usr/share/python-wheels"} <= set(hidden.split())
    assert listing.ok, listing.stderr
    assert "pip" not in listing.stdout and ".whl" not in listing.stdout and "featdel_planted" not in listing.stdout
    assert imported.exit_code != 0 and "IMPORTED" not in imported.stdout and "ModuleNotFoundError" in imported.stderr
    assert read.exit_code != 0 and PLANTED_SECRET not in read.stdout and "PK" not in read.stdout
    assert tools.ok and tools.stdout.strip() == "ok", tools.stderr
    assert written.exit_code != 0
    assert [(v.host, v.writable, v.system, v.hidden) for v in visible] == [
        (tmp_path.resolve(), True, False, ()),
        # the prefix's site-packages and the wheels ensurepip bundles (pip, setuptools): both covered
        (prefix.resolve(), False, False, tuple(sorted([site.parent.resolve(),
                                                       *(d.resolve() for d in prefix.glob("lib/python3*/ensurepip/_bundled"))])))]

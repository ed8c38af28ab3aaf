"""The set-up script behind `make demo` and `make test` (.ci/setup) on a machine without
bubblewrap: `--check` names what is missing, and a non-root run prints the one command to run
and stops with a non-zero exit instead of going on half-working."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / ".ci" / "setup"


@pytest.fixture
def bare():
    """A copy of the script anyone can read (pytest's tmp dirs are 0700), and a PATH with no
    bubblewrap, docker or debootstrap."""
    box = Path(tempfile.mkdtemp(prefix="featdel-setup-"))
    (box / "bin").mkdir()
    shutil.copy(SCRIPT, box / "setup")
    for path in (box, box / "bin", box / "setup"):
        path.chmod(0o755)
    yield box, {"PATH": str(box / "bin"), "HOME": str(box)}
    shutil.rmtree(box)


def test_check_names_what_is_missing(bare):
    box, env = bare
    bash = shutil.which("bash")
    demo = subprocess.run([bash, str(box / "setup"), "--check", "demo"], env=env, capture_output=True, text=True)
    assert demo.returncode == 0 and demo.stdout.split() == ["bubblewrap"]
    test = subprocess.run([bash, str(box / "setup"), "--check", "test"], env=env, capture_output=True, text=True)
    assert test.stdout.split() == ["bubblewrap", "docker.io", "debootstrap"] or (
        Path("/usr/sbin/debootstrap").exists() and test.stdout.split() == ["bubblewrap", "docker.io"])


def test_without_root_it_prints_the_command_and_stops(bare):
    box, env = bare
    bash = shutil.which("bash")
    argv = [bash, str(box / "setup"), "demo"]
    if os.geteuid() == 0:  # become an ordinary user, as on a developer's machine
        argv = [shutil.which("setpriv"), "--reuid=65532", "--regid=65532", "--clear-groups", *argv]
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert done.returncode == 1
    assert "apt-get install -y bubblewrap" in done.stderr and len(done.stderr.strip().splitlines()) == 1

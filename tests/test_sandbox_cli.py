"""Invariant: `featdel sandbox exec` streams the command's output and exits with its code (124 on
timeout, 137 when killed for memory, 2 when the sandbox itself cannot run it, with a one-line
error); `doctor` reports a working local sandbox, lists what it shows of the host and fails when
a Python package sits in those system dirs; the module imports nothing heavy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest
import typer
from typer.testing import CliRunner

from featdel.cli.sandbox import parse_size, sandbox_app

app = typer.Typer()
app.add_typer(sandbox_app, name="sandbox")
runner = CliRunner()


def test_exec_streams_output_and_passes_exit_codes(tmp_path):
    r = runner.invoke(app, ["sandbox", "exec", "--workdir", str(tmp_path), "--", "sh", "-c", "echo hi; exit 7"])
    assert r.exit_code == 7 and "hi" in r.stdout
    assert runner.invoke(app, ["sandbox", "exec", "--timeout", "0.5", "--", "sleep", "5"]).exit_code == 124
    hog = ["sandbox", "exec", "--memory", "64M", "--", "python3", "-c", "x = bytearray(1 << 30)"]
    assert runner.invoke(app, hog).exit_code == 137


def test_exec_with_mount_at_finds_the_venv_of_its_program(tmp_path):
    """What `featdel materialize` prints: a start state shown at the env's src, run by its venv."""
    src, start = tmp_path / "env" / "src", tmp_path / "start"
    src.mkdir(parents=True)
    start.mkdir()
    (start / "mod.py").write_text("print('start state')\n")
    python = sys.prefix + "/bin/python"
    r = runner.invoke(app, ["sandbox", "exec", "--workdir", str(start), "--mount-at", str(src), "--",
                            python, "-c", "import os, mod; print(os.getcwd())"])
    assert r.exit_code == 0, r.output
    assert r.stdout.split("\n")[:2] == ["start state", str(src)]


def test_bad_input_is_a_one_line_error(tmp_path):
    r = runner.invoke(app, ["sandbox", "exec", "--workdir", str(tmp_path / "nope"), "--", "true"])
    assert r.exit_code == 2 and "not an existing directory" in r.output
    assert runner.invoke(app, ["sandbox", "exec", "--memory", "lots", "--", "true"]).exit_code == 2
    assert runner.invoke(app, ["sandbox", "exec", "--sandbox", "vm", "--", "true"]).exit_code == 2
    r = runner.invoke(app, ["sandbox", "exec", "--timeout", "0", "--", "true"])
    assert r.exit_code == 2 and "must be positive" in r.output and "Traceback" not in r.output
    assert parse_size("512M") == 512 << 20 and parse_size("2G") == 2 << 30 and parse_size("1000") == 1000


def test_doctor_reports_a_working_local_sandbox():
    r = runner.invoke(app, ["sandbox", "doctor"])
    assert "ok   local sandbox" in r.stdout, r.stdout
    assert r.exit_code == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a package in a system dir needs root")
def test_doctor_fails_on_a_package_planted_in_a_system_dir():
    """The check is not vacuous: a package dropped in the C library dir (which the sandbox
    shows) is reported, and the doctor exits non-zero until it is gone."""
    from featdel.sandboxes.rootfs import library_dirs

    planted = library_dirs()[0] / f"featdel_planted_{uuid.uuid4().hex[:8]}"
    try:
        planted.mkdir()
        (planted / "__init__.py").write_text("SECRET = 1\n")
        r = runner.invoke(app, ["sandbox", "doctor"])
    finally:
        shutil.rmtree(planted, ignore_errors=True)
    assert r.exit_code == 1 and "FAIL python packages" in r.stdout and str(planted) in r.stdout, r.stdout
    clean = runner.invoke(app, ["sandbox", "doctor"])
    assert "ok   python packages  none" in clean.stdout and "ok   local sees       /usr/bin" in clean.stdout


def test_every_command_has_help_with_an_example():
    for name in ("exec", "build", "doctor"):
        r = runner.invoke(app, ["sandbox", name, "--help"])
        assert r.exit_code == 0 and "featdel sandbox" in r.stdout


def test_module_imports_nothing_heavy():
    code = "import sys, featdel.cli.sandbox; print(sorted({'docker', 'requests'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"

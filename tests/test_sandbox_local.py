"""Invariant: the local backend shows a candidate copy at the checkout's path so an editable
install resolves to the candidate, with the venv and interpreter read-only and a report dir
writable; host environment variables stay out; a broken sandbox raises SandboxError while a
failing command only returns a non-zero RunResult; no cgroup outlives its command; without
bubblewrap the backend refuses unless the caller opts into --unsafe-no-sandbox.

It shows only the task: of the host's /usr only the system dirs a process needs, never Debian's
dist-packages, another /usr/lib tree (a cloud SDK's vendored libraries) or an interpreter
prefix's site-packages, so copies of a package planted there are invisible inside while a host
process reads them; the prefix interpreter, Debian's python3 and sh still work; and `visible()`
lists exactly the host paths a command sees.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest_sandbox import PLANTED_SECRET, loopback_server, module_name, planted_copies

from featdel.core.errors import SandboxError
from featdel.sandboxes import Limits, SandboxSpec, get_backend
from featdel.sandboxes.cgroups import Cgroup
from featdel.sandboxes.local import LocalBackend, visible_roots
from featdel.sandboxes.unsafe import UnsafeBackend


@pytest.fixture(scope="module")
def local():
    return get_backend("local")


def _env(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A checkout (src), a venv whose .pth points at it (what `pip install -e` leaves), a copy."""
    env = tmp_path / "envs" / "k"
    src = env / "src"
    src.mkdir(parents=True)
    (src / "mod.py").write_text("WHO = 'original'\n")
    venv = env / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next(venv.glob("lib/python3*/site-packages"))
    (site / "__editable__.k.pth").write_text(f"{src}\n")
    cand = tmp_path / "cand"
    cand.mkdir()
    (cand / "mod.py").write_text("WHO = 'candidate'\n")
    return src, venv, cand


def test_candidate_copy_appears_at_the_checkout_path(local, tmp_path):
    src, venv, cand = _env(tmp_path)
    reports = tmp_path / "reports"
    reports.mkdir()
    prefix = Path(sys.base_prefix)
    spec = SandboxSpec(workdir=cand, mount_at=src, readonly=(venv, prefix), writable=(reports,))
    with local.open(spec) as sb:
        r = sb.run([str(venv / "bin" / "python"), "-c",
                    f"import mod, os; print(mod.WHO, os.getcwd()); open('{reports}/r.txt', 'w').write('ok')"])
        ro = sb.run(["touch", str(venv / "x")])
    assert r.ok, r.stderr
    assert r.stdout.split() == ["candidate", str(src)]
    assert (reports / "r.txt").read_text() == "ok"
    assert ro.exit_code != 0 and not (venv / "x").exists()
    assert (src / "mod.py").read_text() == "WHO = 'original'\n"


def test_host_environment_stays_out_and_given_env_comes_in(local, tmp_path, monkeypatch):
    monkeypatch.setenv("FEATDEL_HOST_TOKEN", "leak")
    with local.open(SandboxSpec(workdir=tmp_path)) as sb:
        r = sb.run(["sh", "-c", "echo ${FEATDEL_HOST_TOKEN:-absent} $GIVEN"], env={"GIVEN": "yes"})
    assert r.stdout.split() == ["absent", "yes"]


def test_failing_command_is_a_result_broken_sandbox_is_an_error(local, tmp_path):
    with local.open(SandboxSpec(workdir=tmp_path)) as sb:
        assert sb.run(["sh", "-c", "exit 3"]).exit_code == 3
        assert sb.run(["no-such-program"]).exit_code == 127
        with pytest.raises(SandboxError, match="cannot enter"):
            sb.run(["true"], cwd=Path("/no/such/dir"))
    with pytest.raises(SandboxError, match="not an existing directory"):
        local.open(SandboxSpec(workdir=tmp_path / "missing"))
    with pytest.raises(SandboxError, match="system directory"):
        local.open(SandboxSpec(workdir=Path("/etc")))
    with pytest.raises(SandboxError, match="absolute"):
        local.open(SandboxSpec(workdir=tmp_path, mount_at=Path("rel")))
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        get_backend("vm")


def test_no_cgroup_outlives_its_command(local, tmp_path, monkeypatch):
    if local.limiter() == "prlimit":
        pytest.skip("no writable cgroups here (not root)")
    made: list[Cgroup] = []
    real_create = Cgroup.create

    def recording(limits, version):
        made.append(real_create(limits, version))
        return made[-1]

    monkeypatch.setattr(Cgroup, "create", staticmethod(recording))
    with local.open(SandboxSpec(workdir=tmp_path)) as sb:
        sb.run(["sh", "-c", "sleep 30 & echo started"], limits=Limits(timeout_s=5))
        sb.run(["sleep", "30"], limits=Limits(timeout_s=0.5))
    assert len(made) == 2 and all(len(g.dirs) >= 2 for g in made)
    assert [d for g in made for d in g.dirs if d.exists()] == []


def test_output_streams_and_reset_hands_new_files_over(local, tmp_path):
    seen: list[tuple[str, bytes]] = []
    with local.open(SandboxSpec(workdir=tmp_path)) as sb:
        r = sb.run(["sh", "-c", "echo out; echo err >&2"], on_output=lambda n, b: seen.append((n, b)))
        (tmp_path / "new.txt").write_text("from the host")
        sb.reset()
        w = sb.run(["sh", "-c", "echo more >> new.txt"])
    assert r.ok and ("stdout", b"out\n") in seen and ("stderr", b"err\n") in seen
    assert w.ok, w.stderr
    assert (tmp_path / "new.txt").read_text() == "from the hostmore\n"


def test_network_true_shares_the_host_network(local, tmp_path):
    with loopback_server() as port, local.open(SandboxSpec(workdir=tmp_path, network=True)) as sb:
        r = sb.run(["python3", "-c", f"import socket; socket.create_connection(('127.0.0.1', {port}), 2); print('ok')"])
    assert r.stdout.strip() == "ok", r.stderr


def test_without_bubblewrap_it_refuses_unless_unsafe(tmp_path):
    backend = LocalBackend()
    backend.bwrap = None
    assert "apt-get install bubblewrap" in backend.unavailable()
    unsafe = UnsafeBackend("bwrap missing")
    with pytest.raises(SandboxError, match="install bubblewrap"):
        unsafe.open(SandboxSpec(workdir=tmp_path, mount_at=tmp_path / "elsewhere"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_unprivileged_caller_gets_prlimit_limits(tmp_path):
    """A non-root caller: bwrap in a user namespace, limits by prlimit (no cgroups)."""
    work = Path("/var/tmp") / f"featdel-nonroot-{os.getpid()}"
    work.mkdir(exist_ok=True)
    os.chown(work, 65533, 65533)
    code = (
        "from pathlib import Path; from featdel.sandboxes import get_backend, SandboxSpec, Limits, MiB\n"
        "b = get_backend('local'); assert b.limiter() == 'prlimit', b.limiter()\n"
        f"sb = b.open(SandboxSpec(workdir=Path('{work}'), limits=Limits(memory_bytes=256 * MiB, pids=32, timeout_s=30)))\n"
        "hog = sb.run(['python3', '-c', 'x = bytearray(1 << 30); print(\"SURVIVED\")'])\n"
        "fork = 'import os, time\\nn = 0\\nfor _ in range(100):\\n    try:\\n        if os.fork() == 0: time.sleep(5); os._exit(0)\\n        n += 1\\n    except OSError: break\\nprint(n)'\n"
        "forks = sb.run(['python3', '-c', fork])\n"
        "me = sb.run(['id', '-u'])\n"
        "print(hog.exit_code, 'SURVIVED' in hog.stdout, forks.stdout.strip(), me.stdout.strip())\n"
    )
    # The caller must reach featdel's code as uid 65533, but a checkout may sit in a 0700 dir
    # (mktemp -d): stage a world-readable copy of the (stdlib-only) local backend, and run it
    # with the base interpreter rather than the checkout's venv.
    src = Path("/var/tmp") / f"featdel-nonroot-src-{os.getpid()}"
    repo = Path(__file__).resolve().parent.parent
    shutil.copytree(repo / "featdel", src / "featdel", ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(["chmod", "-R", "a+rX", str(src)], check=True, timeout=30)
    python = Path(sys.base_prefix) / "bin" / "python3"
    try:
        out = subprocess.run(["setpriv", "--reuid=65533", "--regid=65533", "--clear-groups",
                              str(python), "-c", code], capture_output=True, text=True, timeout=120,
                             cwd="/", env={"PATH": os.environ["PATH"], "PYTHONPATH": str(src)})
    finally:
        subprocess.run(["rm", "-rf", str(work), str(src)], check=False, timeout=30)
    assert out.returncode == 0, out.stderr[-800:]
    code_, survived, forked, uid = out.stdout.split()
    assert code_ != "0" and survived == "False" and int(forked) < 40 and uid != "0"


@pytest.mark.skipif(os.geteuid() != 0, reason="the hand-over only chowns as root")
def test_handing_the_work_dir_over_never_follows_a_symlink(tmp_path):
    from featdel.sandboxes.hostpaths import hand_over

    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "a").mkdir(parents=True)
    (work / "a" / "f.py").write_text("x = 1\n")
    outside.mkdir()
    (outside / "victim").write_text("host file")
    (work / "file-link").symlink_to(outside / "victim")
    (work / "dir-link").symlink_to(outside)
    hand_over(work)
    assert os.stat(work / "a" / "f.py").st_uid == 65532 and os.lstat(work / "file-link").st_uid == 65532
    assert os.stat(outside / "victim").st_uid == 0 and os.stat(outside).st_uid == 0


def test_reading_what_a_sandbox_wrote_refuses_planted_links(local, tmp_path):
    from featdel.sandboxes.hostpaths import read_untrusted

    secret = tmp_path / "secret"
    secret.write_text("host secret")
    out = tmp_path / "out"
    out.mkdir()
    with local.open(SandboxSpec(workdir=tmp_path / "out")) as sb:
        r = sb.run(["sh", "-c", f"echo '{{}}' > ok.json; ln -s {secret} report.json; mkdir d; "
                                f"ln -s {tmp_path} sub; mkfifo pipe"])
    assert r.ok, r.stderr
    assert read_untrusted(out, "ok.json") == b"{}\n"
    for rel in ("report.json", "sub/secret", "pipe", "../secret"):
        with pytest.raises(SandboxError):
            read_untrusted(out, rel)


def test_bad_limits_are_one_line_errors():
    for bad in ({"timeout_s": 0}, {"memory_bytes": 1000}, {"pids": 1}, {"cpus": 0}, {"output_cap_bytes": -1}):
        with pytest.raises(SandboxError) as info:
            Limits(**bad)
        assert "\n" not in str(info.value)


def test_concurrent_sandboxes_stay_apart(local, tmp_path):
    """What `-j N` does: sandboxes in threads, each seeing only its own work dir and processes."""
    from concurrent.futures import ThreadPoolExecutor

    def worker(i: int) -> list[str]:
        work = tmp_path / f"w{i}"
        work.mkdir()
        seen = []
        with local.open(SandboxSpec(workdir=work)) as sb:
            for j in range(5):
                r = sb.run(["sh", "-c", f"touch mine-{i}-{j}; ls; ls /proc | grep -c '^[0-9]'"])
                assert r.ok, r.stderr
                seen.append(r.stdout)
        return seen

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(worker, range(4)))
    for i, outputs in enumerate(results):
        *files, nprocs = outputs[-1].split()
        assert files == [f"mine-{i}-{j}" for j in range(5)]
        assert int(nprocs) <= 4  # bwrap's init, sh, ls/grep: no process of another sandbox


PREFIX = Path(sys.base_prefix)
PREFIX_PYTHON = str(PREFIX / "bin" / "python3")


def test_planted_copies_outside_the_task_are_invisible(local, tmp_path):
    """What a learner's patch could do to recover deleted code: read or import a copy of it
    from the system's Python packages, an SDK's vendored tree, or the interpreter's own
    site-packages. A host process can; the sandboxed one finds nothing."""
    probe = textwrap.dedent("""
        import importlib, os, sys
        sys.path.append("/usr/lib/python3/dist-packages")  # where Debian's python3 looks
        for path in sys.argv[1:]:
            name = os.path.basename(os.path.dirname(path)) if path.endswith("__init__.py") else os.path.basename(path)[:-3]
            try:
                found = importlib.import_module(name).SECRET
            except ImportError:
                found = "missing"
            print(os.path.exists(path), found)
    """)
    with planted_copies() as files:
        paths = [str(p) for p in files.values()]
        sdk_dir = files["sdk"].parent.parent
        sdk_dir_name = sdk_dir.name
        control = subprocess.run([PREFIX_PYTHON, "-c", probe, *paths], capture_output=True, text=True,
                                 timeout=60, env={"PYTHONPATH": str(files["sdk"].parent)})
        debian = subprocess.run(["/usr/bin/python3", "-c", f"import {module_name(files['dist'])} as m; print(m.SECRET)"],
                                capture_output=True, text=True, timeout=60)
        with local.open(SandboxSpec(workdir=tmp_path, readonly=(PREFIX,))) as sb:
            inside = sb.run([PREFIX_PYTHON, "-c", probe, *paths], env={"PYTHONPATH": str(files["sdk"].parent)})
            debian_inside = sb.run(["python3", "-c", f"import {module_name(files['dist'])}"])
            listing = sb.run(["ls", "-A", "/usr/lib", str(files["site"].parent)])
            cat = sb.run(["cat", *paths])
    assert control.stdout.split("\n")[:3] == [f"True {PLANTED_SECRET}"] * 3, control.stderr
    assert debian.stdout.strip() == PLANTED_SECRET, debian.stderr
    assert inside.ok, inside.stderr
    assert inside.stdout.split("\n")[:3] == ["False missing"] * 3
    assert debian_inside.exit_code != 0 and "ModuleNotFoundError" in debian_inside.stderr
    assert listing.ok, listing.stderr
    assert sdk_dir_name not in listing.stdout and "featdel_planted" not in listing.stdout
    assert "python3\n" not in listing.stdout and "google-cloud-sdk" not in listing.stdout
    assert cat.exit_code != 0 and PLANTED_SECRET not in cat.stdout


def test_the_prefix_interpreter_and_system_tools_still_work(local, tmp_path):
    """The minimal root keeps what a test suite needs: TLS roots, sqlite, time zones from
    /usr/share/zoneinfo, ctypes loading libc, a unittest run (and pytest from a venv); Debian's
    python3 and sh as tools."""
    (tmp_path / "test_small.py").write_text(textwrap.dedent("""
        import unittest
        class T(unittest.TestCase):
            def test_sum(self):
                self.assertEqual(sum(range(4)), 6)
            def test_json(self):
                import json
                self.assertEqual(json.loads('{"a": [1]}'), {"a": [1]})
    """))
    stdlib = textwrap.dedent("""
        import ctypes, ctypes.util, datetime, json, sqlite3, ssl, zoneinfo
        ctx = ssl.create_default_context()
        ctx.load_verify_locations(ssl.get_default_verify_paths().cafile)
        paris = zoneinfo.ZoneInfo("Europe/Paris").utcoffset(datetime.datetime(2024, 1, 1))
        print(ctx.cert_store_stats()["x509_ca"] > 0, paris == datetime.timedelta(hours=1),
              "/usr/share/zoneinfo" in zoneinfo.TZPATH,
              ctypes.CDLL(ctypes.util.find_library("c")).abs(-3),
              sqlite3.connect(":memory:").execute("select 6 * 7").fetchone()[0], json.dumps([1]))
    """)
    venv = Path(sys.prefix)
    readonly = (PREFIX, venv) if venv != PREFIX else (PREFIX,)
    with local.open(SandboxSpec(workdir=tmp_path, readonly=readonly)) as sb:
        libs = sb.run([PREFIX_PYTHON, "-c", stdlib])
        unit = sb.run([PREFIX_PYTHON, "-m", "unittest", "-v", "test_small"])
        pytest_run = sb.run([str(venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_small.py"])
        debian = sb.run(["python3", "-c", "import json, ssl, sqlite3; print(json.dumps({'ok': 1}))"])
        shell = sb.run(["sh", "-c", "echo $((6 * 7)) | cat; env | grep -c PATH"])
    assert libs.ok, libs.stderr
    assert libs.stdout.split() == ["True", "True", "True", "3", "42", "[1]"]
    assert unit.ok and "Ran 2 tests" in unit.stderr and "OK" in unit.stderr, unit.stderr
    assert pytest_run.ok and "2 passed" in pytest_run.stdout, pytest_run.stdout + pytest_run.stderr
    assert debian.ok and debian.stdout.strip() == '{"ok": 1}', debian.stderr
    assert shell.ok and shell.stdout.split() == ["42", "1"], shell.stderr


def test_visible_lists_exactly_what_a_command_sees(local, tmp_path):
    """visible() is what the leak audit searches, so it must be complete: every name a command
    finds under /usr, /usr/lib and /usr/share is one of its roots (or a parent of one), and no
    root is a tree that holds third-party Python code."""
    work, sealed = tmp_path / "work", tmp_path / "sealed"
    work.mkdir()
    sealed.mkdir(mode=0o755)
    spec = SandboxSpec(workdir=work, readonly=(PREFIX,), sealed=(sealed,))
    roots = visible_roots(spec)
    assert sealed.stat().st_mode & 0o777 == 0o755  # a dry look changes nothing
    site = next(PREFIX.glob("lib/python3*/site-packages"))
    bundled = sorted(PREFIX.glob("lib/python3*/ensurepip/_bundled"))  # the installer's wheels: covered too
    with local.open(spec) as sb:
        assert sb.visible() == roots
        listing = sb.run(["sh", "-c", f"ls -A /usr; echo --; ls -A /usr/lib; echo --; ls -A /usr/share; echo --; "
                                      f"ls -A {site} {' '.join(map(str, bundled))}"])
    assert listing.ok, listing.stderr
    seen = [set(part.split()) for part in listing.stdout.split("--\n")]

    def expected(under: str) -> set[str]:
        return {r.inside.relative_to(under).parts[0] for r in roots if r.inside.is_relative_to(under) and r.inside != Path(under)}

    assert seen[:3] == [expected("/usr"), expected("/usr/lib"), expected("/usr/share")]
    assert seen[3] <= {f"{d}:" for d in (site, *bundled)}  # both empty: the prefix's site-packages and ensurepip's wheels, covered
    system = [r for r in roots if r.system]
    assert all(not r.writable for r in system)
    for r in system:
        assert not any(r.host == Path(bad) or Path(bad).is_relative_to(r.host) or r.host.is_relative_to(bad)
                       for bad in ("/usr/lib/python3", "/usr/local", "/usr/share/python-wheels",
                                   "/usr/lib/google-cloud-sdk")), r
        assert r.host not in (Path("/usr"), Path("/usr/lib"), Path("/usr/share"))
    spec_roots = [r for r in roots if not r.system]
    assert [(r.host, r.writable, r.hidden) for r in spec_roots] == [
        (work.resolve(), True, ()), (PREFIX.resolve(), False, tuple(sorted([site.resolve(), *bundled]))),
        (sealed.resolve(), True, ())]


def test_a_venv_with_system_site_packages_keeps_them(tmp_path):
    """include-system-site-packages = true means the venv imports the prefix's packages."""
    from featdel.sandboxes.hostpaths import covered, resolve, spec_roots

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
                   check=True, timeout=60)
    own = resolve(SandboxSpec(workdir=tmp_path, readonly=(venv, PREFIX)))
    assert [r.hidden for r in spec_roots(own)] == [(), (), ()]
    assert covered(PREFIX.resolve()) == tuple(sorted(d.resolve() for kind in ("site-packages", "ensurepip/_bundled")
                                                     for d in PREFIX.glob(f"lib/python3*/{kind}")))

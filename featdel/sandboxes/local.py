"""The `local` backend: each command runs in a fresh bubblewrap sandbox (about 3 ms to start).

In: a `SandboxSpec` and commands. Out: `RunResult`s. What a command sees is `visible()`: a
minimal root of host system dirs (`rootfs.system_roots()`: /usr/bin, /usr/sbin, the C library
dirs, locales, TLS roots, zone data, Debian Python's standard library, a short list of /etc
files), never the rest of /usr, where vendored copies of well-known libraries live; plus a
made-up passwd/group, fresh /dev, /proc, /tmp and /run, the `readonly` paths read-only (an
interpreter prefix's site-packages covered) and the work directory and `writable` paths
writable. Nothing else of the host exists in there: not /root, /home, /work, the host's /tmp,
nor /run/docker.sock. New network (only `lo`), PID, IPC and UTS namespaces; no capabilities;
uid 65532; no new privileges.

As root, bwrap runs privileged (it can bind paths under a 0700 /root) and `setpriv` drops to
uid 65532 as the last step before the command; limits come from a per-command cgroup the
launcher joins before exec'ing bwrap. As any other user, bwrap runs unprivileged in a user
namespace and prlimit sets the limits. Either way the command is PID 1's child in its own PID
namespace, so killing bwrap (--die-with-parent) ends every process; the cgroup sweep is a second
line for root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes import hostpaths, rootfs
from featdel.sandboxes.base import SANDBOX_GID, SANDBOX_UID, Limits, OutputSink, RunResult, SandboxSpec, Visible
from featdel.sandboxes.capture import kill_process_group, run_captured
from featdel.sandboxes.cgroups import Cgroup, cgroup_version

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"

PASSWD = ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
          f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}:sandbox:/tmp:/bin/sh\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
GROUP = f"root:x:0:\nsandbox:x:{SANDBOX_GID}:\nnogroup:x:65534:\n"
DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp",
               "LANG": "C.UTF-8", "USER": "sandbox"}

# Joins the cgroups (as root, before bwrap forks anything), then becomes bwrap. A constant
# script: paths and argv arrive as positional arguments, never inside the script text.
_CD = 'cd -- "$0" 2>/dev/null || { echo "featdel-cd: cannot enter $0" >&2; exit 125; }; exec "$@"'
_JOIN = ('while [ "$1" != -- ]; do echo $$ >"$1" || { echo "featdel-join: $1" >&2; exit 125; }; shift; done; '
         'shift; exec "$@"')


def visible_roots(spec: SandboxSpec) -> list[Visible]:
    """What a local sandbox opened with `spec` shows of the host (`LocalSandbox.visible()`),
    without opening one: the spec is checked but nothing is handed over."""
    sealed = hostpaths.sealed_binds(spec, seal=False)
    return [*rootfs.system_roots(), *hostpaths.spec_roots(hostpaths.resolve(spec), sealed)]


def _which(name: str) -> str | None:
    return shutil.which(name, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")


class LocalBackend:
    """bubblewrap on this host."""

    name = "local"

    def __init__(self) -> None:
        self.bwrap = _which("bwrap")
        self.setpriv = _which("setpriv")
        self.prlimit = _which("prlimit")

    def unavailable(self) -> str | None:
        if self.bwrap is None:
            return f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
        if os.geteuid() == 0 and self.setpriv is None:
            return "setpriv is missing (it drops root in the sandbox): apt-get install util-linux"
        if cgroup_version() is None and self.prlimit is None:
            return "neither writable cgroups nor prlimit are available: apt-get install util-linux"
        if not rootfs.libc_visible(rootfs.system_roots()):
            return "no libc.so.6 in /usr/lib/<triplet> or /usr/lib64: this host's layout is not supported"
        return None

    def limiter(self) -> str:
        """How limits are enforced here: 'cgroup v1', 'cgroup v2' or 'prlimit'."""
        version = cgroup_version()
        return f"cgroup {version}" if version else "prlimit"

    def open(self, spec: SandboxSpec) -> LocalSandbox:
        if reason := self.unavailable():
            raise SandboxError(reason)
        return LocalSandbox(self, spec)


class LocalSandbox:
    """A spec checked once; every `run` starts a fresh bwrap with it."""

    def __init__(self, backend: LocalBackend, spec: SandboxSpec) -> None:
        self.backend = backend
        self.spec = spec
        resolved = hostpaths.prepare(spec)
        self.workdir, self.mount_at, self.readonly, self.writable = resolved
        # Fixed at open: every run binds exactly these, so visible() is what commands saw.
        self._roots = [*rootfs.system_roots(), *hostpaths.spec_roots(resolved, hostpaths.sealed_binds(spec))]
        self._closed = False

    def visible(self) -> list[Visible]:
        return list(self._roots)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True

    def reset(self) -> None:
        # Nothing outlives a run here (fresh /tmp, no processes); only new files need handing over.
        for path in (self.workdir, *(src for src, _ in self.writable)):
            hostpaths.hand_over(path)

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        on_output: OutputSink | None = None,
    ) -> RunResult:
        if self._closed:
            raise SandboxError("this sandbox is closed; open a new one")
        if not argv:
            raise SandboxError("empty command: give the program and its arguments")
        limits = limits or self.spec.limits
        inner_cwd = Path(cwd) if cwd is not None else self.mount_at
        if not inner_cwd.is_absolute():
            raise SandboxError(f"cwd {cwd} must be an absolute path inside the sandbox")
        version = cgroup_version()
        group = Cgroup.create(limits, version) if version else None
        fds: list[int] = []
        try:
            bwrap = self._bwrap_argv(inner_cwd, {**DEFAULT_ENV, **(env or {})}, limits, fds)
            launcher = self._launcher(group, limits)
            status_r, status_w = os.pipe()
            fds.append(status_w)
            full = [*launcher, *bwrap[:1], "--json-status-fd", str(status_w), *bwrap[1:],
                    *self._drop_root(inner_cwd), *argv]

            def kill(proc: object) -> None:
                kill_process_group(proc)  # type: ignore[arg-type]
                if group is not None:
                    group.kill_all()

            try:
                got = run_captured(full, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
                                   pass_fds=fds, timeout_s=limits.timeout_s,
                                   cap=limits.output_cap_bytes, kill=kill, on_output=on_output)
            finally:
                for fd in fds:
                    os.close(fd)
                fds.clear()
                with os.fdopen(status_r, "rb") as status:
                    started = b"child-pid" in status.read()
            stderr = got.stderr.text()
            if _broke(started, got.exit_code, stderr) and not got.timed_out:
                raise SandboxError(f"the local sandbox could not start the command: {stderr.strip()[-300:]}")
            oom = group.oom_kills() if group is not None else 0
        finally:
            for fd in fds:
                os.close(fd)
            if group is not None:
                group.kill_all()
                group.remove()
        return RunResult(
            argv=tuple(argv), exit_code=got.exit_code, stdout=got.stdout.text(), stderr=stderr,
            duration_s=got.duration_s, timed_out=got.timed_out,
            killed=not got.timed_out and (oom > 0 or got.exit_code == 137),
            stdout_truncated=got.stdout.truncated, stderr_truncated=got.stderr.truncated,
        )

    def start(self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str] | None = None,
              limits: Limits | None = None) -> Resident:
        """Start a command that stays: a `Resident` whose stdin and stdout are pipes to it, in a
        bwrap like `run`'s (same mounts, namespaces, uid and cgroup limits, its own cgroup) that
        lives until `Resident.close()`. Its stderr is dropped. The caller owns the timeouts."""
        if self._closed:
            raise SandboxError("this sandbox is closed; open a new one")
        limits = limits or self.spec.limits
        version = cgroup_version()
        group = Cgroup.create(limits, version) if version else None
        fds: list[int] = []
        try:
            bwrap = self._bwrap_argv(cwd, {**DEFAULT_ENV, **(env or {})}, limits, fds, mqueue=True)
            full = [*self._launcher(group, limits), *bwrap, *self._drop_root(cwd), *argv]
            proc = subprocess.Popen(full, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, pass_fds=fds,
                                    start_new_session=True)
        except BaseException:
            if group is not None:
                group.kill_all()
                group.remove()
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return Resident(proc, group)

    def _launcher(self, group: Cgroup | None, limits: Limits) -> list[str]:
        if group is not None:
            return ["/bin/sh", "-c", _JOIN, "featdel-join", *map(str, group.procs_files), "--"]
        assert self.backend.prlimit is not None
        caps = []
        if limits.pids:
            # RLIMIT_NPROC counts every process of the uid on the host, so allow for those.
            caps.append(f"--nproc={limits.pids + _processes_of(_target_uid())}")
        if limits.memory_bytes:
            caps.append(f"--as={limits.memory_bytes}")
        return [self.backend.prlimit, *caps, "--"] if caps else []

    def _drop_root(self, cwd: Path) -> list[str]:
        if os.geteuid() != 0:
            return []
        assert self.backend.setpriv is not None
        # bwrap without capabilities cannot enter a 0700 work dir owned by the sandbox uid, so
        # the sandbox uid itself changes directory after setpriv.
        return [self.backend.setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_GID}",
                "--clear-groups", "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs", "--",
                "/bin/sh", "-c", _CD, str(cwd)]

    def _bwrap_argv(self, cwd: Path, env: Mapping[str, str], limits: Limits, fds: list[int], *,
                    mqueue: bool = False) -> list[str]:
        """`mqueue`: mount the IPC namespace's POSIX message queues at /dev/mqueue (a resident
        command empties it between runs; a fresh sandbox has a new namespace anyway)."""
        assert self.backend.bwrap is not None
        a = [self.backend.bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-uts",
             "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--clearenv"]
        if not self.spec.network:
            a.append("--unshare-net")
        if os.geteuid() == 0:
            # Privileged bwrap; setpriv (kept caps only for that) drops to the sandbox uid.
            a += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID",
                  "--cap-add", "CAP_SETPCAP"]
        else:
            a += ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_UID),
                  "--gid", str(SANDBOX_GID), "--cap-drop", "ALL"]
        for key, value in env.items():
            a += ["--setenv", key, value]
        for target, link in rootfs.top_level_links():
            a += ["--symlink", target, str(link)]
        tmp_size = [] if limits.memory_bytes is None else ["--size", str(limits.memory_bytes)]
        # /tmp is sticky and world-writable, as on a host and in the docker backend: HOME and
        # TMPDIR point there (bwrap's default 0755 left the sandbox uid unable to write it).
        a += ["--dev", "/dev", "--proc", "/proc", "--perms", "01777", *tmp_size, "--tmpfs", "/tmp", "--tmpfs", "/run",
              "--perms", "0755", "--dir", "/etc", "--perms", "01777", "--tmpfs", "/var/tmp",
              "--symlink", "../run", "/var/run"]
        for name, text in (("passwd", PASSWD), ("group", GROUP)):
            r, w = os.pipe()
            os.write(w, text.encode())
            os.close(w)
            fds.append(r)
            a += ["--perms", "0644", "--ro-bind-data", str(r), f"/etc/{name}"]
        a += _mounts(self._roots)
        if mqueue:
            a += ["--mqueue", "/dev/mqueue"]
        return [*a, "--chdir", "/" if os.geteuid() == 0 else str(cwd), "--"]


class Resident:
    """A command started by `LocalSandbox.start`: `proc` (stdin and stdout are pipes), and
    `close()`, which kills it and every process of its cgroup."""

    def __init__(self, proc: subprocess.Popen[bytes], group: Cgroup | None) -> None:
        self.proc, self.group = proc, group

    def oom_kills(self) -> int:
        return self.group.oom_kills() if self.group is not None else 0

    def processes(self) -> set[int]:
        """The host pids in its cgroup (empty without cgroups: prlimit mode)."""
        return self.group.pids() if self.group is not None else set()

    def stopped(self) -> bool:
        """Whether a process of its cgroup is stopped (SIGSTOP) or traced."""
        for pid in self.processes():
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state in ("T", "t"):
                return True
        return False

    def close(self) -> None:
        try:
            kill_process_group(self.proc)
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    try:
                        pipe.close()
                    except OSError:
                        pass  # a broken pipe to a process already gone
        finally:
            if self.group is not None:
                self.group.kill_all()
                self.group.remove()


def _broke(started: bool, code: int, stderr: str) -> bool:
    """bwrap, the cgroup join, setpriv or the cd failed, rather than the command."""
    if not started:
        return True
    last = stderr.rstrip().rpartition("\n")[2]
    if code == 125 and last.startswith(("featdel-join:", "featdel-cd:")):
        return True
    return code == 1 and last.startswith(("bwrap: ", "setpriv: ")) and "failed to execute" not in last


def _target_uid() -> int:
    return SANDBOX_UID if os.geteuid() == 0 else os.getuid()


def _processes_of(uid: int) -> int:
    count = 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


def _mounts(roots: list[Visible]) -> list[str]:
    """bwrap arguments binding every root and covering what it hides, shallowest first so a
    deeper path lands on top. A cover is an empty tmpfs, made read-only once everything inside
    it is mounted (a bind may sit below it)."""
    ops: list[tuple[Path, list[str]]] = []
    for root in roots:
        ops.append((root.inside, ["--bind" if root.writable else "--ro-bind", str(root.host), str(root.inside)]))
        ops += [(root.inside_of(h), ["--perms", "0755", "--tmpfs", str(root.inside_of(h))]) for h in root.hidden]
    a: list[str] = []
    made: set[Path] = {Path(p) for p in ("/", "/tmp", "/var", "/run", "/var/tmp", "/etc")}
    mounted: list[Path] = []
    for dest, op in sorted(ops, key=lambda o: len(o[0].parts)):
        # bwrap makes missing parents 0700, which uid 65532 cannot walk through (/usr, /root);
        # parents inside a mount exist already and are read-only.
        for parent in reversed(dest.parents):
            if parent not in made and not any(parent.is_relative_to(m) for m in mounted):
                a += ["--perms", "0755", "--dir", str(parent)]
                made.add(parent)
        a += op
        mounted.append(dest)
    for root in roots:
        a += [arg for h in root.hidden for arg in ("--remount-ro", str(root.inside_of(h)))]
    return a

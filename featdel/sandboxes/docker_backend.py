"""The `docker` backend: one warm container per sandbox, commands run in it with `exec`.

In: a `SandboxSpec` (its `image`, else the backend's `default_image`) and commands. Out:
`RunResult`s. The container: `--network none` (bridge only when `network=True`, for installs),
read-only root, tmpfs /tmp, /var/tmp and /run, the work directory bind-mounted writable at
`mount_at`, `readonly` paths read-only and `writable` paths writable at their own paths, memory
(no swap), pids and CPU limits, uid 65532, all capabilities dropped, no-new-privileges, and
docker's init as PID 1 so orphans are reaped.

What it sees of the host is `visible()`: only those bind mounts (a readonly interpreter
prefix's site-packages covered, as in the local backend). The rest is the image's, and the
image's own third-party Python dirs (Debian's dist-packages, /usr/share/python-wheels,
/usr/local's site-packages: `images.third_party_dirs`) are covered by empty read-only tmpfs
mounts, listed in `image_hidden`: a learner's code could read copies of deleted code there.

Why exec in a warm container: `docker run` costs about 195 ms, `exec` about 51 ms. Between
candidates `reset()` kills every process but the container's own two and empties the tmpfs
dirs; a timeout does the same, and a container that stops answering is replaced.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes import hostpaths, images
from featdel.sandboxes.base import SANDBOX_GID, SANDBOX_UID, Limits, OutputSink, RunResult, SandboxSpec, Visible
from featdel.sandboxes.capture import TIMEOUT_EXIT, CappedBuffer
from featdel.sandboxes.local import DEFAULT_ENV

USER = f"{SANDBOX_UID}:{SANDBOX_GID}"
LABEL = "featdel.sandbox"
# PID 1 is docker-init and $0 its `sleep`; every other process is the sandbox's and must go.
# Sweeps repeat until nothing else is left, zombies included (they hold pids until reaped), because
# a process can fork between the listing and its kill.
_KILL_ALL = ('i=0; while [ $i -lt 5000 ]; do left=0; for d in /proc/[0-9]*; do p=${d#/proc/}; '
             '[ "$p" -ne 1 ] && [ "$p" -ne "$0" ] && [ "$p" -ne $$ ] && { left=1; kill -9 "$p" 2>/dev/null; }; '
             'done; [ $left = 0 ] && exit 0; i=$((i+1)); done; exit 1')
# Processes whose parent is PID 1: at start, only the `sleep` (an exec's parent is outside).
_INIT_CHILDREN = ('cat /proc/1/task/1/children 2>/dev/null || for d in /proc/[0-9]*; do '
                  'grep -q "^PPid:[[:space:]]*1$" "$d/status" 2>/dev/null && echo "${d#/proc/}"; done')
# -xdev: never descend into a bind mount (a work dir under /tmp is on another filesystem).
_WIPE = "find /tmp /var/tmp /run -xdev -mindepth 1 -delete 2>/dev/null; exit 0"
_COVER = "ro,nosuid,nodev,noexec,mode=0755"


class _NotStarted(SandboxError):
    """runc could not start the command (`OCI runtime exec failed`, not a missing program)."""


class DockerBackend:
    name = "docker"

    def __init__(self, default_image: str = images.BASE_IMAGE) -> None:
        self.default_image = default_image
        self._pruned = False

    def unavailable(self) -> str | None:
        return images.engine_reason()

    def open(self, spec: SandboxSpec) -> DockerSandbox:
        if not self._pruned:
            prune_orphans()
            self._pruned = True
        return DockerSandbox(spec, spec.image or self.default_image)


def prune_orphans() -> int:
    """Remove sandbox containers whose owning process on this host is gone (it was killed
    before it could close them); their `sleep infinity` would otherwise run forever."""
    host = socket.gethostname()
    removed = 0
    for box in images.client().containers.list(all=True, filters={"label": LABEL}):
        labels = box.labels or {}
        pid = labels.get(LABEL + ".pid", "")
        if labels.get(LABEL + ".host") != host or not pid.isdigit() or Path(f"/proc/{pid}").exists():
            continue
        try:
            box.remove(force=True)
            removed += 1
        except Exception:  # gone already, or removed by another process at the same time
            pass
    return removed


class DockerSandbox:
    def __init__(self, spec: SandboxSpec, image: str) -> None:
        import docker

        self.spec = spec
        self.image = image
        resolved = hostpaths.prepare(spec)
        self.workdir, self.mount_at, self.readonly, self.writable = resolved
        self._sealed = hostpaths.sealed_binds(spec)
        self._roots = hostpaths.spec_roots(resolved, self._sealed)
        self._client = images.client()
        self._errors = docker.errors
        if not images.image_exists(image):
            raise SandboxError(f"image {image} not found: run `featdel sandbox build --base-only` "
                               "(or build the repo image)")
        self.image_hidden = images.third_party_dirs(image)  # inside paths, not host paths
        self._container = None
        self._start()

    def visible(self) -> list[Visible]:
        """The bind mounts: the only host paths a container sees (the image is `image`)."""
        return list(self._roots)

    def _start(self) -> None:
        from docker.types import Mount

        limits = self.spec.limits
        mounts = [Mount(str(self.mount_at), str(self.workdir), type="bind")]
        mounts += [Mount(str(dest), str(src), type="bind", read_only=True) for src, dest in self.readonly]
        mounts += [Mount(str(dest), str(src), type="bind")
                   for src, dest in (*self.writable, *self._sealed)]
        tmp_opts = "rw,nosuid,nodev,mode=1777" + (f",size={limits.memory_bytes}" if limits.memory_bytes else "")
        tmpfs = {"/tmp": tmp_opts, "/var/tmp": tmp_opts, "/run": tmp_opts}
        tmpfs.update((str(root.inside_of(h)), _COVER) for root in self._roots for h in root.hidden)
        tmpfs.update((str(path), _COVER) for path in self.image_hidden)
        try:
            self._container = self._client.containers.run(
                self.image, ["sleep", "infinity"], detach=True, init=True,
                network_mode="bridge" if self.spec.network else "none",
                read_only=True, tmpfs=tmpfs,
                mounts=mounts, user=USER, cap_drop=["ALL"], security_opt=["no-new-privileges"],
                mem_limit=limits.memory_bytes, memswap_limit=limits.memory_bytes,
                pids_limit=limits.pids, nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
                working_dir=str(self.mount_at), environment=dict(DEFAULT_ENV),
                labels={LABEL: "1", LABEL + ".host": socket.gethostname(), LABEL + ".pid": str(os.getpid())},
                entrypoint=[],
            )
            self._keep = self._sleep_pid()
        except (self._errors.DockerException, SandboxError) as exc:
            self.close()
            if isinstance(exc, SandboxError):
                raise
            raise SandboxError(f"could not start a container from {self.image}: {exc}") from exc

    def _sleep_pid(self) -> str:
        """The pid of init's one child, `sleep infinity` (init may not have started it yet)."""
        api = self._client.api
        pids: list[str] = []
        for _ in range(100):
            exec_id = api.exec_create(self._container.id, ["sh", "-c", _INIT_CHILDREN], user=USER)["Id"]
            pids = api.exec_start(exec_id).decode().split()
            if len(pids) == 1:
                return pids[0]
            time.sleep(0.02)
        raise SandboxError(f"container {self._container.short_id} has an unexpected init: children {pids}")

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._container is not None:
            try:
                self._container.remove(force=True)
            except self._errors.DockerException:
                pass
            self._container = None

    def reset(self) -> None:
        self._sweep()
        self._exec_quiet(["sh", "-c", _WIPE])
        for path in (self.workdir, *(src for src, _ in self.writable)):
            hostpaths.hand_over(path)

    def _exec_quiet(self, argv: list[str], timeout_s: float = 30) -> int:
        api = self._client.api
        exec_id = api.exec_create(self._container.id, argv, user=USER)["Id"]
        done = threading.Event()
        threading.Thread(target=lambda: (api.exec_start(exec_id), done.set()), daemon=True).start()
        if not done.wait(timeout_s):
            return -1
        return api.exec_inspect(exec_id)["ExitCode"]

    def _exit_code(self, exec_id: str) -> int:
        """The exec's exit code; the output stream can end a moment before docker records it."""
        for _ in range(200):
            info = self._client.api.exec_inspect(exec_id)
            if not info["Running"] and info["ExitCode"] is not None:
                return int(info["ExitCode"])
            time.sleep(0.01)
        raise SandboxError(f"docker never reported how exec {exec_id[:12]} ended")

    def _sweep(self) -> None:
        """Kill every sandbox process; replace the container if that does not work."""
        try:
            ok = self._container is not None and self._exec_quiet(["sh", "-c", _KILL_ALL, self._keep]) == 0
        except self._errors.DockerException:
            ok = False
        if not ok:
            self.close()
            self._start()

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        on_output: OutputSink | None = None,
    ) -> RunResult:
        if self._container is None:
            raise SandboxError("this sandbox is closed; open a new one")
        if not argv:
            raise SandboxError("empty command: give the program and its arguments")
        limits = limits or self.spec.limits
        try:
            return self._run_once(argv, cwd, env, limits, on_output)
        except _NotStarted:
            # What an earlier command left behind (a fork bomb's processes, zombies not yet reaped)
            # can keep runc from starting this one: that is not this command's failure. Clear the
            # container (or replace it) and try once more; a second failure is the sandbox's.
            self._sweep()
            return self._run_once(argv, cwd, env, limits, on_output)

    def _run_once(self, argv, cwd, env, limits: Limits, on_output: OutputSink | None) -> RunResult:
        api = self._client.api
        out, err = CappedBuffer(limits.output_cap_bytes), CappedBuffer(limits.output_cap_bytes)
        start = time.monotonic()
        for attempt in (1, 2):
            try:
                exec_id = api.exec_create(self._container.id, list(argv), user=USER,
                                          workdir=str(cwd or self.mount_at),
                                          environment={**DEFAULT_ENV, **(env or {})})["Id"]
                stream = api.exec_start(exec_id, stream=True, demux=True)
                break
            except self._errors.APIError as exc:
                if attempt == 2 or exc.status_code != 409:  # 409: not running
                    raise SandboxError(f"docker exec failed: {exc}") from exc
                # A previous command killed the container's init: start a fresh container.
                self.close()
                self._start()
            except self._errors.DockerException as exc:
                raise SandboxError(f"docker exec failed: {exc}") from exc
        failure: list[BaseException] = []

        def pump() -> None:
            try:
                for chunk_out, chunk_err in stream:
                    for name, chunk, buf in (("stdout", chunk_out, out), ("stderr", chunk_err, err)):
                        if chunk:
                            buf.add(chunk)
                            if on_output is not None:
                                on_output(name, chunk)
            except BaseException as exc:  # surfaced below as a broken sandbox
                failure.append(exc)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        reader.join(limits.timeout_s)
        timed_out = reader.is_alive()
        if timed_out:
            self._sweep()
            reader.join(10)
        duration = time.monotonic() - start
        if failure and not timed_out:
            raise SandboxError(f"lost the output stream of docker exec: {failure[0]}")
        code = TIMEOUT_EXIT if timed_out else self._exit_code(exec_id)
        said = out.text() + err.text()
        if code in (126, 127) and said.startswith("OCI runtime exec failed"):
            if "executable file not found" not in said and "no such file" not in said:
                raise _NotStarted(f"docker could not start the command: {said.strip()[:300]}")
            code = 127  # a missing program; a shell would say 127 too
        return RunResult(
            argv=tuple(argv), exit_code=code, stdout=out.text(), stderr=err.text(),
            duration_s=duration, timed_out=timed_out, killed=not timed_out and code == 137,
            stdout_truncated=out.truncated, stderr_truncated=err.truncated,
        )

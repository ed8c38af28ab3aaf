"""Start pytest for featdel: the outcome channel, the tripwire and the runner's fingerprint are set
up before any code of the tree runs, then pytest runs with only the configuration featdel names.

Run as `python featdel_launch.py PYTEST_ARGS...` from a read-only directory outside the tree. The
host says where the run's spec is in $FEATDEL_SPEC: a JSON file in the sealed directory (the
sandbox can open it by name but not list the directory) holding the channel's name, the key that
signs each record, and the lines the patch added (the tripwire's attribution). The launcher reads
the spec and unlinks it before anything else happens, so code under test that reads the
environment (or /proc/self/environ) finds the name of a file that is gone.

The channel is a FIFO the host holds open for reading: each record (one test's outcome, a
tripwire, the collected ids) leaves the process as it happens, signed and numbered. Nothing
written can be taken back, and records written after the last one, or twice, void the stream.
The exported eval scripts run the same launcher with a host of their own
(featdel_host.py beside it), so they read the same channel.

Why a launcher rather than `python -m pytest -p featdel_report`: `-m` puts the working directory
(the tree under test) first on sys.path, so a `featdel_report.py` or `pytest.py` in the tree
would replace ours. Here the plugin and pytest are imported from our directory and the venv
before the tree joins sys.path.
This file runs inside the sandbox with the repository's interpreter: standard library only.
"""

import hashlib
import hmac
import json
import os
import re
import sys
import sysconfig
import time

# Bound before any code under test runs: a later monkeypatch of these names changes nothing here.
_dumps, _write, _open, _unlink, _open_file = json.dumps, os.write, os.open, os.unlink, open
_new_mac, _sha256 = hmac.new, hashlib.sha256
_getframe = sys._getframe
_stat, _statvfs, _now_ns = os.stat, os.statvfs, time.time_ns

# The audit events that inspect or rewire the running process: a tripwire when code the patch
# added raises one (sys.audit names them; see docs/grading.md for what it cannot see).
WATCHED = frozenset({
    "sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers", "gc.get_referents",
    "sys.settrace", "sys.setprofile", "sys.addaudithook", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata",
    "ctypes.addressof", "ctypes.string_at", "ctypes.wstring_at", "ctypes.PyObj_FromPtr", "sys.monitoring.register_callback",
    "object.__setattr__", "object.__delattr__", "object.__getattr__", "os.fork", "os.forkpty", "os.kill", "os.killpg",
    "signal.pthread_kill", "sys._clear_type_cache", "os.link", "os.symlink", "code.__new__",
    "marshal.loads", "marshal.load",
})
# Attribute events (object.__setattr__/__getattr__) that matter: frames, code and closures.
WATCHED_ATTRS = frozenset({"__code__", "tb_frame", "f_back", "gi_frame", "cr_frame", "ag_frame", "f_globals",
                           "f_locals", "f_builtins", "__globals__", "gi_code", "cr_code", "f_code", "__closure__"})

# Standard-library functions that read a frame or a code object for their own use and hand none of
# it back (the caller's module name, file and line, a function's parameters, a traceback's text):
# an implementation's logging call, namedtuple, Enum or signature raises these through them, and
# they are not the patch's frame access (grading honest implementations found each).
BENIGN = frozenset({
    ("collections/__init__.py", "namedtuple"), ("typing.py", "_caller"), ("enum.py", "_create_"),
    ("logging/__init__.py", "<lambda>"), ("logging/__init__.py", "findCaller"),
    ("logging/__init__.py", "_is_internal_frame"), ("inspect.py", "_signature_from_function"),
    ("inspect.py", "_has_code_flag"), ("asyncio/coroutines.py", "_format_coroutine"),
    ("traceback.py", "_walk_tb_with_full_positions"),
})


def channel(fd: int, key: bytes):
    """`emit(record)`: signed, numbered records to the host. Everything it uses is bound here, so
    rebinding a module attribute later changes nothing."""
    dumps, write, mac0, seq, live = _dumps, _write, _new_mac(key, digestmod=_sha256), [0], [fd >= 0]

    def emit(record: dict) -> None:
        if not live[0]:
            return
        payload = dumps(record, separators=(",", ":"))
        mac = mac0.copy()
        mac.update(f"{seq[0]}\n{payload}".encode())
        line = f"{seq[0]} {mac.hexdigest()} {payload}\n".encode()
        seq[0] += 1
        try:
            while line:
                line = line[write(fd, line):]
        except OSError:
            live[0] = False  # the host sees a stream that stops: the run is void

    return emit


class _Every:
    """The lines of a file written while the run runs: all of them."""

    def __contains__(self, line) -> bool:
        return True

    def __bool__(self) -> bool:
        return True


def patch_files(added: dict):
    """`lines_of(name)`: what counts as the patch's lines in the file
    `name` names, found by the file itself (device and inode) rather than by the name: a module
    imported through `pkg/./mod.py`, `pkg//mod.py` or `pkg/../pkg/mod.py` (a `__path__` entry
    built at run time) has a `co_filename` no string lookup finds (an outside red team ran a
    frame oracle from a file of the patch so named). A file written after the run started (its
    inode changed after `started`; code cannot set ctime) on a filesystem the run can write is the
    patch's whole: code under test that writes a module and imports it wrote it from its own
    lines. A read-only mount's file (the environment, the standard library) cannot have been
    written by the run, though its ctime moves whenever the host links it again (uv installing
    another environment from the same cache). Everything else: none."""
    started, ids, none = _now_ns(), {}, frozenset()
    for path, lines in added.items():
        try:
            st = _stat(path)
        except OSError:
            continue
        ids[(st.st_dev, st.st_ino)] = lines
    every = _Every()

    def lines_of(name):
        try:
            st = _stat(name)
        except (OSError, TypeError, ValueError):
            return none
        found = ids.get((st.st_dev, st.st_ino))
        if found is not None:
            return found
        return every if st.st_ctime_ns > started and _writable(name) else none

    return lines_of


def _writable(name) -> bool:
    """Whether the filesystem that holds `name` is mounted writable (a sandbox mounts all but the
    tree and its scratch space read-only)."""
    try:
        return not _statvfs(name).f_flag & os.ST_RDONLY
    except (OSError, TypeError, ValueError):
        return True


def tripwire(emit, lines_of, roots: tuple, tests: frozenset = frozenset()) -> None:
    """An audit hook (it cannot be removed) that reports WATCHED events raised from lines the patch
    added: `lines_of(path)` is the set of the patch's line numbers in a file (`patch_files`). Opening one of
    `tests` (the F2P test files) from such a line is one too: an implementation never reads the
    tests, an oracle that copies their expected values does; and so is opening one from any thread
    but the one pytest runs on, whose stack may hold no line of the patch (an outside red team read
    the planted held-out copies through `threading.Thread(target=..., args=(map(Path.read_text,
    ...),))`, standard library all the way down). Each thread has its own guard against the hook's
    own events, so one thread busy in it cannot hide another's."""
    import _thread

    busy, sent, getframe, watched, attrs = set(), set(), _getframe, WATCHED, WATCHED_ATTRS
    stdlib, relative = sysconfig.get_paths()["stdlib"] + os.sep, _relative
    isfile, files, texts = os.path.isfile, {}, {}
    ident, main = _thread.get_ident, _thread.get_ident()  # installed on the main thread, before pytest

    def is_file(name: str) -> bool:
        if name not in files:
            files[name] = not name.startswith("<") and isfile(name)
        return files[name]

    code_type, mine = type(getframe(0).f_code), {}

    def mark(code) -> None:
        """`code`, and the functions and classes defined in it, are the patch's: built at run
        time by a standard-library gadget (`timeit.Timer`, a namedtuple, `eval`) that a line of
        the patch called. Kept (not only their ids) so no later object takes an id."""
        stack = [code]
        while stack:
            c = stack.pop()
            if type(c) is code_type and id(c) not in mine:
                mine[id(c)] = c
                stack.extend(c.co_consts)

    def first(frame, reads_tests=False):
        """(the frame that asked, built): the first frame, going down the stack, of a real file
        outside the standard library (for `reads_tests`, the first that is a line of the patch)
        or of code the patch built (`mark`), or None; `built` if it passed code built at run time
        (a name that is not a real file, the import system's frozen modules aside)."""
        built = False
        while frame is not None:
            name = frame.f_code.co_filename
            if id(frame.f_code) in mine:
                return frame, True  # whatever name it was given (a third red team's: one in the stdlib's folder)
            if is_file(name):
                if not name.startswith(stdlib) and (not reads_tests or frame.f_lineno in lines_of(name)):
                    return frame, built
            elif not name.startswith("<frozen "):
                built = True  # a name that is no file: code built at run time, in whatever folder it claims
            frame = frame.f_back
        return None, built

    def benign(frame) -> bool:
        """Did the standard library raise this event for its own use (BENIGN; a traceback's text
        without its locals; a standard-library module's import, every frame up to the import
        system the standard library's)?"""
        name = frame.f_code.co_filename
        if not name.startswith(stdlib) or not is_file(name) or id(frame.f_code) in mine:
            return False
        key = (name[len(stdlib):], frame.f_code.co_name)
        if key in BENIGN:
            return True
        caller = frame.f_back
        if key == ("traceback.py", "_extract_from_extended_frame_gen"):
            return (caller is not None and caller.f_code.co_filename == name and caller.f_code.co_name == "__init__"
                    and not frame.f_locals.get("capture_locals"))
        while caller is not None and caller.f_code.co_filename.startswith(stdlib) and is_file(
                caller.f_code.co_filename) and id(caller.f_code) not in mine:
            frame, caller = caller, caller.f_back
        return (caller is not None and caller.f_code.co_filename.startswith("<frozen importlib")
                and frame.f_code.co_name == "<module>")

    def own_source(name: str, source) -> bool:
        """Is `source` the text of the file `name`, as an import compiles it? Code compiled
        from anything else under a real file's name (a syntax tree too) is code built at run
        time that wants to pass for that file's (an outside red team compiled a stand-in test
        under the name of the test's own file)."""
        if not isinstance(source, (bytes, str)):
            return False
        if name not in texts:
            try:
                with _open_file(name, "rb") as fh:
                    texts[name] = fh.read()
            except OSError:
                texts[name] = None
        data = source.encode("utf-8", "surrogateescape") if isinstance(source, str) else source
        return texts[name] is not None and data == texts[name]

    def hook(event, args):
        me = ident()
        if me in busy:
            return
        dynamic = event in ("exec", "compile")
        # What the import system reads besides source: compiled code, or an archive zipimport
        # opens (its frozen modules ask; a `.py` it reads is attributed by its own name).
        compiled = event == "open" and args and isinstance(args[0], (str, bytes)) and (
            str(args[0]).endswith((".pyc", ".pyo")) or (not str(args[0]).endswith(".py") and (
                getframe(1).f_code.co_filename.startswith("<frozen "))))
        if not dynamic and not compiled and event not in watched and not (
                event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes))
                and (str(args[0]).startswith("/proc") or (event == "open" and tests and _in(args[0], tests)))):
            return
        if event.startswith("object.") and (len(args) < 2 or args[1] not in attrs):
            return
        busy.add(me)
        try:
            reads_tests = event == "open" and tests and _in(args[0], tests)
            if reads_tests and me != main and ("open-thread", str(args[0])) not in sent:
                sent.add(("open-thread", str(args[0])))
                emit({"kind": "trip", "rule": "audit", "event": event, "what": str(args[0])[:100],
                      "where": f"a thread pytest did not start ({me})"})
                return
            if compiled:
                # Runs write no bytecode (PYTHONDONTWRITEBYTECODE): compiled code the patch wrote,
                # or wrote during the run, holds code objects that may name any file (an outside
                # red team's frame oracle ran from a `.pyc` named for an unchanged file); so may
                # an archive's.
                path = str(args[0])
                if lines_of(path) and ("compiled", path) not in sent:
                    sent.add(("compiled", path))
                    emit({"kind": "trip", "rule": "audit", "event": event, "what": path[-100:],
                          "where": "compiled code or an archive the patch or the run wrote, read by the import system"})
                return
            frame = getframe(1)
            if event.startswith("marshal.") and frame is not None and frame.f_code.co_filename.startswith(
                    "<frozen importlib"):
                return  # the import system reads a module's cached code; a patch's own call counts
            if dynamic:
                # Code built at run time: an import execs a real file's code, a dataclass or
                # namedtuple compiles in the standard library; only a direct call from built
                # code or from an added line counts (a standard-library gadget is not followed).
                name = getattr(args[0], "co_filename", None) if event == "exec" else (
                    args[1] if len(args) > 1 else None)
                if not isinstance(name, str) or frame is None:
                    return
                caller = frame.f_code.co_filename
                if is_file(name):
                    if event == "exec" or own_source(name, args[0]):
                        return  # a real file's code: an import (its compile was checked)
                elif caller.startswith("<frozen importlib") or (
                        caller.startswith(stdlib) and is_file(caller) and id(frame.f_code) not in mine):
                    # The standard library or the import system builds it (frozen modules): its
                    # code is the patch's when a line of the patch, or no file at all, is below.
                    if event == "exec" and caller.startswith(stdlib):
                        asked, _ = first(frame)
                        if asked is None or id(asked.f_code) in mine or asked.f_lineno in lines_of(
                                asked.f_code.co_filename):
                            mark(args[0])
                    return
            # Skip the standard library (inspect.currentframe, gc wrappers) and code built at run
            # time (compiled under any name that is not a real file): the first frame of a real
            # file asked. Opening a test file counts from an added line anywhere on the stack
            # (an oracle may read the tests through a site-packages helper).
            # A stack with no real file on it but the standard library's (a thread's target, a
            # callback) is the patch's when it builds code or runs code built at run time: an
            # outside red team compiled an oracle in `py_compile` on a thread of its own.
            if not dynamic and not reads_tests and frame is not None and benign(frame):
                return
            frame, built = first(frame, reads_tests)
            if frame is None:
                if (dynamic or built or event.startswith("marshal.")) and not reads_tests and (event, me) not in sent:
                    sent.add((event, me))
                    emit({"kind": "trip", "rule": "audit", "event": event, "what": "",
                          "where": "code built at run time, with no file of the tree below it on its stack"})
                return
            path, line = frame.f_code.co_filename, frame.f_lineno
            if id(frame.f_code) in mine and (event, path, line) not in sent:
                sent.add((event, path, line))
                emit({"kind": "trip", "rule": "audit", "event": event, "what": "",
                      "where": f"{path[:80]}:{line}, code a line of the patch built at run time"})
            elif line in lines_of(path) and (event, path, line) not in sent:
                sent.add((event, path, line))
                what = (args[1] if event.startswith("object.") else "" if dynamic
                        else str(args[0])[:100] if args else "")
                emit({"kind": "trip", "rule": "audit", "event": event, "what": what,
                      "where": f"{relative(path, roots)}:{line}"})
        finally:
            busy.discard(me)

    sys.addaudithook(hook)


def _in(path, paths: frozenset) -> bool:
    """`path` is one of `paths`, or has the name of one (an open relative to a `dir_fd` names the
    file from a folder the audit event does not say)."""
    try:
        name = os.fsdecode(path)
        return os.path.abspath(name) in paths or os.path.basename(name) in {os.path.basename(p) for p in paths}
    except (TypeError, ValueError):
        return False


def _relative(path: str, roots: tuple) -> str:
    for root in roots:
        if path.startswith(root + os.sep):
            return path[len(root) + 1:]
    return path


def env_plugins(blocked: set) -> list:
    """The pytest11 entry points of the distributions installed in this interpreter's
    site-packages (never the tree's), less those the command line or the task's configuration
    block (`-p no:NAME`): with autoloading off, the only plugins pytest loads."""
    import importlib.metadata

    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    names = set()
    for dist in importlib.metadata.distributions(path=paths):
        for ep in dist.entry_points:
            if ep.group == "pytest11" and ep.name not in blocked:
                names.add(ep.value.split(":", 1)[0].strip())  # the module: `-p` imports it on any pytest
    return sorted(names)


def main() -> int:
    spec_path = os.environ.pop("FEATDEL_SPEC", "")
    spec = {}
    if spec_path:
        with open(spec_path, "rb") as fh:
            spec = json.loads(fh.read())
        try:
            _unlink(spec_path)
        except OSError:
            pass
    fd = _open(spec["channel"], os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0)) if spec else -1
    emit = channel(fd, bytes.fromhex(spec.get("key", "00")))
    cwd = os.getcwd()
    added = {os.path.join(cwd, rel): frozenset(lines) for rel, lines in spec.get("added", {}).items()}
    lines_of = patch_files(added) if added else None
    if added:
        tripwire(emit, lines_of, (cwd,), frozenset(os.path.join(cwd, rel) for rel in spec.get("watch", [])))

    import featdel_report  # sys.path[0] is this file's read-only directory
    import pytest

    config = spec.get("config") or ""
    said = " ".join(sys.argv[1:])
    if config and os.path.isfile(config):
        with open(config, "rb") as fh:
            said += " " + fh.read().decode("utf-8", "replace")
    plugins = env_plugins(set(re.findall(r"no:([\w.-]+)", said)))
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    plugin = featdel_report.build(emit, expect_config=spec.get("config"),
                                  env_plugins=plugins, changed_files=lines_of or (lambda name: ()),
                                  watch_files=[os.path.join(cwd, rel) for rel in spec.get("watch", [])],
                                  run_only=spec.get("run_only"))
    # From here on the tree is where `python -m pytest` would put it: first on sys.path.
    sys.path[0] = cwd
    args = [arg for name in plugins for arg in ("-p", name)] + sys.argv[1:]
    return int(pytest.main(args, plugins=[plugin]))


if __name__ == "__main__":
    sys.exit(main())

"""Run a repository's pytest suite in a sandbox and read the outcome from a JSON report.

In: an `Env`, the tree to test (the env's own checkout, or a modified copy mounted in its
place), which tests, and a sandbox backend. Out: a `SuiteRun` with per-test outcomes read from
the report our plugin writes outside the tree, never from printed text. A test the report does
not mention counts as not passed. A run whose report is missing says the suite broke
(`broken` set), which callers keep apart from tests that failed.

The report channel: pytest starts through our launcher (read-only, outside the tree) with the
plugin passed as an object, so no file in the tree can stand in for it; the report goes to a
random name in a sealed directory (the sandbox may create files there but not list them), and
the name leaves the environment before test code runs. See docs/grading.md for what code
running inside the test process can still do.

Fresh or warm: `run_suite` opens a sandbox for its one run. A `SuiteRunner` used as a context
manager (`warm_runner`) opens one sandbox per work directory and keeps it for all its runs,
reset after each: no process of a run outlives it and /tmp (HOME) is emptied. A run on a given
tree moves the tree's entries into the runner's fixed staging directory (one rename each, no
copy) and moves them back once every process of the run is gone, so the caller's tree holds
exactly what the run left there, as with a fresh sandbox (the grader hashes it afterwards). A
run with no tree runs on the env's own checkout, as `run_suite` does. The report and coverage
directories are emptied before every run and the report name is new every run.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from featdel.env.envs import Env
from featdel.sandboxes.hostpaths import hand_over

PASSED = "passed"


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteRun:
    outcomes: dict[str, str]  # node id -> passed|failed|error|skipped|xfailed|xpassed
    durations: dict[str, float]
    collected: list[str]
    collect_errors: list[str]
    # With `RunOptions.run_only`: every test collected (those not run too); else `collected`
    found: list[str] = field(default_factory=list)
    exit_code: int
    collect_messages: dict[str, str] = field(default_factory=dict)  # node id -> pytest's error text
    report_exitstatus: int | None = None  # what the report says pytest's exit status was
    trips: list[str] = field(default_factory=list)  # tampering the test process itself reported
    config: str | None = None  # the config file pytest read, as the run reported it
    seconds: float
    timed_out: bool = False
    broken: str | None = None  # why no report was produced (sandbox or interpreter broke)
    output_tail: str = ""

    def passed(self) -> set[str]:
        return {t for t, o in self.outcomes.items() if o == PASSED}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunOptions:
    tests: list[str] | None = None  # node ids; None runs the whole suite
    collect_only: bool = False
    coverage_to: Path | None = None  # measure coverage with per-test contexts, save data here
    timeout_s: float = 900.0
    extra_args: list[str] = field(default_factory=list)
    added: dict[str, list[int]] | None = None  # path -> lines a patch added (the tripwire's attribution)
    watch: list[str] | None = None  # test files whose collected tests must keep their assertions
    # Collect the whole suite (as `tests=None`) but run only these node ids (`SuiteRun.found`: all
    # that was collected): verification's build check and its first run in one pytest start
    run_only: list[str] | None = None
    # Python writes the bytecode it compiles into the tree (featdel.env.bytecode: a trusted run
    # on the original tree, whose pycs later runs reuse); every other run writes none
    write_bytecode: bool = False


PLUGIN_FILES = ("featdel_report.py", "featdel_launch.py", "featdel_zygote.py")
EMPTY_CONFIG = "empty/pytest.ini"  # named with -c when the tree has no config file of its own


def plugin_dir(env: Env) -> Path:
    """A copy of the report plugin and launcher inside the env (mounted read-only in the sandbox)."""
    target = env.root / "plugin"
    for name in PLUGIN_FILES:
        source = resources.files("featdel").joinpath(f"env/pytest_plugin/{name}").read_text()
        dest = target / name
        if not dest.exists() or dest.read_text() != source:
            target.mkdir(exist_ok=True)
            dest.write_text(source)
    empty = target / EMPTY_CONFIG
    if not empty.is_file():
        empty.parent.mkdir(parents=True, exist_ok=True)
        empty.write_text("[pytest]\n")
    return target


def suite_readonly(env: Env) -> tuple[Path, ...]:
    """What a test run shows read-only besides the tree: the venv, our plugin, the interpreter.
    An env baked into an image (`featdel.env.envbuild.ImageEnv`) brings its own venv and interpreter
    at paths that exist only inside the image: then only the plugin comes from the host."""
    if getattr(env, "in_image", False):
        return (plugin_dir(env),)
    return (env.root / "venv", plugin_dir(env), env.python_prefix)


def run_suite(env: Env, backend, options: RunOptions = RunOptions(), *, tree: Path | None = None,
              image: str | None = None) -> SuiteRun:
    """Run the suite (or `options.tests`) on `tree` (default: the env's checkout) in a fresh
    sandbox; `image` is the per-repo image when the backend is docker."""
    return SuiteRunner(env, backend, image=image, warm=False).run_suite(options, tree=tree)


def warm_runner(env: Env, backend, image: str | None = None) -> SuiteRunner:
    """`with warm_runner(env, backend, image) as runner: runner.run_suite(options, tree=...)`:
    one sandbox for every run, reset between them (see the module docstring)."""
    return SuiteRunner(env, backend, image=image, warm=True)


def sweep_warm_roots(tmp: Path) -> list[Path]:
    """Remove the warm runners' folders (`featdel-warm-<pid>-*`) whose process is gone: a worker
    killed mid-candidate (Ray retries it elsewhere) never reaches `close`. A live process's folder
    is never touched. Returns what was removed."""
    removed = []
    for path in tmp.glob("featdel-warm-*-*"):
        pid = path.name.split("-")[2]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class SuiteRunner:
    """Runs commands of one env in sandboxes of one backend: a fresh sandbox per run
    (`warm=False`, usable without `with`) or one warm sandbox per work directory (`warm=True`,
    used as a context manager)."""

    def __init__(self, env: Env, backend, *, image: str | None = None, warm: bool = True) -> None:
        self.env, self.backend, self.image, self.warm = env, backend, image, warm
        self._root: Path | None = None
        self._boxes: dict[Path, object] = {}  # work dir -> its warm sandbox
        # A warm pytest per work dir (featdel.env.zygote) for the plain test runs of a warm
        # runner whose backend can keep a command open; set by verification, never by grading
        self.zygote = False
        self._zygotes: dict[Path, object] = {}
        self._no_zygote = False
        self._import_roots: dict[str, list[str] | None] | None = None  # the venv's, read once

    def __enter__(self) -> SuiteRunner:
        if self.warm:
            sweep_warm_roots(Path(tempfile.gettempdir()))
            self._root = Path(tempfile.mkdtemp(prefix=f"featdel-warm-{os.getpid()}-"))
            for name in ("stage", "out", "sealed"):
                (self._root / name).mkdir()
            (self._root / "out").chmod(0o777)  # coverage data: the sandbox writes here as a non-root user
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            zygotes, self._zygotes = list(self._zygotes.values()), {}
            for zygote in zygotes:
                zygote.close()
            for box in self._boxes.values():
                box.close()
        finally:
            self._boxes.clear()
            if self._root is not None:
                shutil.rmtree(self._root, ignore_errors=True)
                self._root = None

    def retarget(self, env: Env) -> None:
        """Run with `env` from now on: the same environment with another recipe (mining adds
        `--ignore`s to its test command after the first run)."""
        if (env.root, env.src) != (self.env.root, self.env.src):
            raise ValueError(f"a runner for {self.env.root} cannot run {env.root}; open another")
        self.env = env

    def run_suite(self, options: RunOptions = RunOptions(), *, tree: Path | None = None) -> SuiteRun:
        """Run the suite (or `options.tests`) on `tree` (default: the env's checkout)."""
        from featdel.env.stream import Channel

        # Forked from the warm pytest where it may be; a zygote that could not say (it died in the
        # run, or never started) leaves no result, and the run starts again fresh, on a new channel
        warm_pytest = (self.zygote and self.warm and not self._no_zygote and options.coverage_to is None
                       and not options.write_bytecode and getattr(self.backend, "name", "") == "local")
        for warm in (True, False) if warm_pytest else (False,):
            with self._dirs() as (out_dir, sealed):
                argv, config = _argv(self.env, options, out_dir, tree)
                with Channel(sealed, added=options.added, config=config, watch=options.watch,
                             run_only=options.run_only) as channel:
                    variables = {**self.env.environ(), "HOME": "/tmp", "FEATDEL_SPEC": str(channel.spec)}
                    if options.write_bytecode:
                        variables.pop("PYTHONDONTWRITEBYTECODE", None)
                    result = self._exec(argv, tree, variables, options.timeout_s, out_dir, sealed, warm_pytest=warm)
                if result is None:
                    continue
                stream = channel.stream(ran=not options.collect_only)
                data_file = out_dir / "coverage.sqlite"
                if options.coverage_to is not None and data_file.is_file() and not data_file.is_symlink():
                    options.coverage_to.parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(data_file, options.coverage_to)
                break
        broken = None
        if stream.problem is not None:
            why = _why(result.stdout + result.stderr)
            broken = (f"the suite did not finish within {options.timeout_s:.0f}s" if result.timed_out else
                      f"pytest wrote no report (exit {result.exit_code}): {why}" if stream.start is None else
                      f"pytest's report is incomplete ({stream.problem}; exit {result.exit_code}): {why}")
        errors = stream.collect_errors
        return SuiteRun(
            outcomes={k: v["outcome"] for k, v in stream.tests.items()},
            durations={k: v["duration"] for k, v in stream.tests.items()},
            collected=stream.collected,
            found=stream.collected if stream.found is None else stream.found,
            collect_errors=[e.get("nodeid") or "<session>" for e in errors],
            collect_messages={e.get("nodeid") or "<session>": str(e.get("message", "")) for e in errors},
            exit_code=result.exit_code,
            report_exitstatus=stream.exitstatus,
            trips=stream.trips,
            config=(stream.start or {}).get("config"),
            seconds=result.duration_s,
            timed_out=result.timed_out,
            broken=broken,
            output_tail=(result.stdout + result.stderr)[-4000:],
        )

    def run(self, argv: Sequence[str], *, tree: Path | None = None, env: Mapping[str, str] | None = None,
            timeout_s: float = 120.0):
        """Run any command (cwd: the checkout) on `tree` as a test run would; a `RunResult`. A
        `python -c CODE` of the env's interpreter (the build check's import) is forked from the
        warm pytest where a test run would be, else run fresh."""
        forked = (self.zygote and self.warm and not self._no_zygote and tree is not None and len(argv) >= 3
                  and argv[1] == "-c" and hasattr(self.env, "venv") and argv[0] == str(self.env.venv / "bin" / "python")
                  and getattr(self.backend, "name", "") == "local")
        for warm in (True, False) if forked else (False,):
            with self._dirs() as (out_dir, sealed):
                result = self._exec(list(argv), tree, dict(env or {}), timeout_s, out_dir, sealed, warm_pytest=warm)
            if result is not None:
                return result
        raise AssertionError("unreachable: a fresh run always has a result")

    @contextmanager
    def _dirs(self) -> Iterator[tuple[Path, Path]]:
        """(report dir, sealed dir) for one run: new ones, or the warm sandbox's emptied."""
        if self._root is not None:
            for name in ("out", "sealed"):
                _empty(self._root / name)
            yield self._root / "out", self._root / "sealed"
            return
        if self.warm:
            raise ValueError("a warm runner runs inside `with warm_runner(...) as runner:`")
        out_dir = Path(tempfile.mkdtemp(prefix="featdel-report-"))
        out_dir.chmod(0o777)  # coverage data: the sandbox writes here as a non-root user
        sealed = Path(tempfile.mkdtemp(prefix="featdel-sealed-"))
        try:
            yield out_dir, sealed
        finally:
            shutil.rmtree(sealed, ignore_errors=True)
            shutil.rmtree(out_dir, ignore_errors=True)

    def _spec(self, workdir: Path, out_dir: Path, sealed: Path, timeout_s: float):
        from featdel.sandboxes.base import Limits, SandboxSpec

        return SandboxSpec(workdir=workdir, mount_at=self.env.src, readonly=suite_readonly(self.env),
                           writable=(out_dir,), sealed=(sealed,), image=self.image, limits=Limits(timeout_s=timeout_s))

    def _exec(self, argv: Sequence[str], tree: Path | None, variables: dict[str, str], timeout_s: float,
              out_dir: Path, sealed: Path, *, warm_pytest: bool = False):
        from featdel.sandboxes.base import Limits

        cwd, limits = self.env.src, Limits(timeout_s=timeout_s)
        if self._root is None:
            with self.backend.open(self._spec(tree or self.env.src, out_dir, sealed, timeout_s)) as sandbox:
                return sandbox.run(argv, cwd=cwd, env=variables)
        workdir = self.env.src if tree is None else self._root / "stage"
        if workdir not in self._boxes:
            self._boxes[workdir] = self.backend.open(self._spec(workdir, out_dir, sealed, 900.0))
        sandbox = self._boxes[workdir]
        zygote = None
        if tree is not None:
            _empty(workdir)  # only after a run that failed to hand its tree back is anything left
            _reset_folder(workdir)
            _reset_folder(out_dir, mode=0o777)
            if warm_pytest:  # started before the tree is in: the zygote never imports a line of a tree
                zygote = self._zygote(workdir, sandbox, argv, cwd, variables)
            _move_entries(tree, workdir)
        try:
            hand_over(workdir)
            hand_over(out_dir)
            if warm_pytest:  # None: the caller runs it again fresh
                code = argv[2] if argv[1] == "-c" else None
                # `python -c` puts the working directory (the tree) first on its path too
                roots = self._roots() if code is None else {**self._roots(), "": None}
                if zygote is None or _shadows(workdir, roots, zygote.loaded):  # the tree's entries are there now
                    return None
                from featdel.sandboxes.local import DEFAULT_ENV

                return zygote.run(argv[3:] if code is not None else argv[2:], cwd=cwd, env={**DEFAULT_ENV, **variables},
                                  timeout_s=timeout_s, sealed=sealed, code=code)
            return sandbox.run(argv, cwd=cwd, env=variables, limits=limits)
        finally:
            try:
                sandbox.reset()  # before the tree goes back: no process of this run may still write to it
            finally:
                if tree is not None:
                    _move_entries(workdir, tree)

    def _roots(self) -> dict[str, list[str] | None]:
        """Where the venv's .pth files put the checkout on the interpreter's path
        (featdel.env.tools.tree_import_roots), read at the first use: the venv does not change."""
        if self._import_roots is None:
            from featdel.env.tools import tree_import_roots

            self._import_roots = tree_import_roots(self.env)
        return self._import_roots

    def _zygote(self, workdir: Path, sandbox, argv: Sequence[str], cwd: Path, variables: dict[str, str]):
        """`workdir`'s warm pytest, started now (on an empty staging folder) if it is not running;
        None where there is none: not a launcher or `python -c` command, a backend that cannot keep a command
        open, or one that never became ready (not tried again)."""
        from featdel.env.zygote import Zygote

        launcher = str(plugin_dir(self.env) / "featdel_launch.py")
        if len(argv) < 2 or argv[1] not in (launcher, "-c") or not hasattr(sandbox, "start"):
            return None
        zygote = self._zygotes.get(workdir)
        if zygote is None or not zygote.alive:
            if self._no_zygote:
                return None
            # Empty, but with the folders the venv's .pth files name: the interpreter puts on its
            # path only those that exist when it starts, and every child keeps that path
            for root in self._roots():
                if root and not root.startswith(".."):
                    (workdir / root).mkdir(parents=True, exist_ok=True)
            hand_over(workdir)
            start_env = {k: v for k, v in variables.items() if k != "FEATDEL_SPEC"}
            try:
                zygote = self._zygotes[workdir] = Zygote(sandbox, argv[0], plugin_dir(self.env), cwd, start_env)
            finally:
                _empty(workdir)
            self._no_zygote = not zygote.alive
        return zygote if zygote.alive else None


def _reset_folder(folder: Path, mode: int = 0o755) -> None:
    """A warm runner's folder as made, whatever the last run did to it (the staging and report
    folders are one inode for every run, owned by the sandbox uid): its mode, no ACL or user
    attribute."""
    os.chmod(folder, mode)
    for name in os.listxattr(folder):
        if name.startswith(("user.", "system.posix_acl_")):
            try:
                os.removexattr(folder, name)
            except OSError:
                pass


def _shadows(tree: Path, roots: dict[str, list[str] | None], loaded: frozenset[str]) -> bool:
    """Would a fresh run on `tree` import one of the modules the zygote has loaded (`loaded`: top-
    level names) from the tree instead, or run a start-up hook of the tree's? The interpreter
    starts with the tree on its path only through the venv's .pth files (`roots`: their path lines
    and the editable finders' mappings that point into the checkout, from
    featdel.env.tools.tree_import_roots). Then that run goes fresh."""
    for root, names in roots.items():
        where = tree / root if root else tree
        for name in names or (os.listdir(where) if where.is_dir() else []):
            top = name.split(".", 1)[0]
            if top in loaded or top in ("sitecustomize", "usercustomize"):
                return True
    return False


def _move_entries(source: Path, dest: Path) -> None:
    """Move every entry of `source` into the empty `dest`: a rename each on one filesystem."""
    for name in os.listdir(source):
        shutil.move(source / name, dest / name)


def _empty(directory: Path) -> None:
    """Remove what a run left in `directory` (never following a link it planted)."""
    for entry in os.scandir(directory):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)


def _why(output: str) -> str:
    """The most telling line of a crashed run: the last exception line, else the last line."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
    return (errors or lines or ["no output"])[-1][:240]


def _argv(env: Env, options: RunOptions, out_dir: Path, tree: Path | None) -> tuple[list[str], str | None]:
    """The command line of one run, and the config file it names (a path inside the sandbox;
    None when the tree is not on this host: an env baked into an image, run on its own checkout)."""
    from featdel.env.pytestconfig import find_config

    test_cmd = list(env.recipe.test_cmd)
    python = str(env.venv / "bin" / "python")
    if test_cmd[:3] == ["python", "-m", "pytest"]:
        pytest_args = test_cmd[3:]
    else:
        raise ValueError(f"test command must start with `python -m pytest`: {test_cmd}")
    pytest_args += list(options.extra_args)
    if any(env.venv.glob("lib/python*/site-packages/pytest_cov/")):
        # A repo's `--cov` addopts would start a second tracer that takes over from ours
        # (semver 3.0.2 mined at 0.0% line coverage): pytest-cov stands down, ours measures.
        pytest_args.append("--no-cov")
    if options.collect_only:
        pytest_args.append("--collect-only")
    if options.tests is not None and not options.tests:
        raise ValueError("an empty test selection runs nothing; pass None for the whole suite")
    if options.run_only is not None and (options.tests is not None or options.collect_only or not options.run_only):
        raise ValueError("run_only collects the whole suite and runs some of it: no `tests`, no collect_only, "
                         "at least one id")
    host_tree = tree if tree is not None else (None if getattr(env, "in_image", False) else env.src)
    config = None
    if host_tree is not None:
        # Only the configuration featdel names: pytest never looks for another file in the tree.
        found = find_config(host_tree, options.tests)
        config = str(env.src / found) if found else str(plugin_dir(env) / EMPTY_CONFIG)
        rootdir = str((env.src / found).parent) if found else str(env.src)
        pytest_args += ["-c", config, f"--rootdir={rootdir}", f"--confcutdir={rootdir}"]
    if options.tests is not None:
        pytest_args += ["--", *options.tests]
    launcher = str(plugin_dir(env) / "featdel_launch.py")
    if options.coverage_to is None:
        return [python, launcher, *pytest_args], config
    rcfile = out_dir / "coveragerc"
    include = ",".join(
        f"{env.src / d}/*" if not d.endswith(".py") else str(env.src / d) for d in env.recipe.package_dirs
    )
    rcfile.write_text(f"[run]\ndata_file = {out_dir / 'coverage.sqlite'}\ninclude = {include}\n")
    return [python, "-m", "coverage", "run", f"--rcfile={rcfile}", launcher, *pytest_args], config

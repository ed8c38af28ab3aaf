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
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from featdel.envs import Env

PASSED = "passed"


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteRun:
    outcomes: dict[str, str]  # node id -> passed|failed|error|skipped|xfailed|xpassed
    durations: dict[str, float]
    collected: list[str]
    collect_errors: list[str]
    exit_code: int
    collect_messages: dict[str, str] = field(default_factory=dict)  # node id -> pytest's error text
    report_exitstatus: int | None = None  # what the report says pytest's exit status was
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


PLUGIN_FILES = ("featdel_report.py", "featdel_launch.py")


def plugin_dir(env: Env) -> Path:
    """A copy of the report plugin and launcher inside the env (mounted read-only in the sandbox)."""
    target = env.root / "plugin"
    for name in PLUGIN_FILES:
        source = resources.files("featdel").joinpath(f"pytest_plugin/{name}").read_text()
        dest = target / name
        if not dest.exists() or dest.read_text() != source:
            target.mkdir(exist_ok=True)
            dest.write_text(source)
    return target


def suite_readonly(env: Env) -> tuple[Path, ...]:
    """What a test run shows read-only besides the tree: the venv, our plugin, the interpreter.
    An env baked into an image (`featdel.envbuild.ImageEnv`) brings its own venv and interpreter
    at paths that exist only inside the image: then only the plugin comes from the host."""
    if getattr(env, "in_image", False):
        return (plugin_dir(env),)
    return (env.root / "venv", plugin_dir(env), env.python_prefix)


def run_suite(env: Env, backend, options: RunOptions = RunOptions(), *, tree: Path | None = None,
              image: str | None = None) -> SuiteRun:
    """Run the suite (or `options.tests`) on `tree` (default: the env's checkout); `image` is
    the per-repo image when the backend is docker."""
    from featdel.sandboxes.base import Limits, SandboxSpec

    tree = tree or env.src
    out_dir = Path(tempfile.mkdtemp(prefix="featdel-report-"))
    out_dir.chmod(0o777)  # coverage data: the sandbox writes here as a non-root user
    sealed = Path(tempfile.mkdtemp(prefix="featdel-sealed-"))
    report = sealed / f"report-{secrets.token_hex(16)}.json"
    argv = _argv(env, options, out_dir)
    variables = {**env.environ(), "HOME": "/tmp", "FEATDEL_REPORT": str(report)}
    spec = SandboxSpec(
        workdir=tree,
        mount_at=env.src,
        readonly=suite_readonly(env),
        writable=(out_dir,),
        sealed=(sealed,),
        image=image,
        limits=Limits(timeout_s=options.timeout_s),
    )
    try:
        with backend.open(spec) as sandbox:
            result = sandbox.run(argv, cwd=env.src, env=variables)
        data, broken = _read_report(sealed, report.name)
    finally:
        shutil.rmtree(sealed, ignore_errors=True)
    if data is None and broken is None:
        broken = (f"the suite did not finish within {options.timeout_s:.0f}s" if result.timed_out else
                  f"pytest wrote no report (exit {result.exit_code}): {_why(result.stdout + result.stderr)}")
    data = data or {"tests": {}, "collected": [], "collect_errors": []}
    data_file = out_dir / "coverage.sqlite"
    if options.coverage_to is not None and data_file.is_file() and not data_file.is_symlink():
        options.coverage_to.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(data_file, options.coverage_to)
    shutil.rmtree(out_dir, ignore_errors=True)
    return SuiteRun(
        outcomes={k: v["outcome"] for k, v in data["tests"].items()},
        durations={k: v["duration"] for k, v in data["tests"].items()},
        collected=data["collected"],
        collect_errors=[e["nodeid"] or "<session>" for e in data["collect_errors"]],
        collect_messages={e["nodeid"] or "<session>": str(e.get("message", "")) for e in data["collect_errors"]
                          if isinstance(e, dict)},
        exit_code=result.exit_code,
        report_exitstatus=data.get("exitstatus"),
        seconds=result.duration_s,
        timed_out=result.timed_out,
        broken=broken,
        output_tail=(result.stdout + result.stderr)[-4000:],
    )


def _read_report(sealed: Path, name: str) -> tuple[dict | None, str | None]:
    """(report, None), (None, why it is unusable), or (None, None) when there is none. The
    sandbox owns what it writes: never follow a link it planted, nor read without bound."""
    from featdel.errors import SandboxError
    from featdel.sandboxes.hostpaths import read_untrusted

    if not (sealed / name).exists() and not (sealed / name).is_symlink():
        return None, None
    try:
        data = json.loads(read_untrusted(sealed, name, limit=256 << 20))
        if not isinstance(data, dict) or not isinstance(data.get("tests"), dict):
            raise ValueError("not a featdel report")
        for entry in data["tests"].values():
            if not isinstance(entry, dict) or not isinstance(entry.get("outcome"), str):
                raise ValueError("malformed test entry")
        if not isinstance(data.get("collected"), list) or not isinstance(data.get("collect_errors"), list):
            raise ValueError("malformed collection lists")
        return data, None
    except (ValueError, SandboxError) as exc:
        return None, f"unreadable report: {str(exc)[:200]}"


def _why(output: str) -> str:
    """The most telling line of a crashed run: the last exception line, else the last line."""
    lines = [ln.strip() for ln in output.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.match(r"^[\w.]*(Error|Exception|Exit)\b.*:", ln)]
    return (errors or lines or ["no output"])[-1][:240]


def _argv(env: Env, options: RunOptions, out_dir: Path) -> list[str]:
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
    if options.tests is not None:
        if not options.tests:
            raise ValueError("an empty test selection runs nothing; pass None for the whole suite")
        pytest_args += ["--", *options.tests]
    launcher = str(plugin_dir(env) / "featdel_launch.py")
    if options.coverage_to is None:
        return [python, launcher, *pytest_args]
    rcfile = out_dir / "coveragerc"
    include = ",".join(
        f"{env.src / d}/*" if not d.endswith(".py") else str(env.src / d) for d in env.recipe.package_dirs
    )
    rcfile.write_text(f"[run]\ndata_file = {out_dir / 'coverage.sqlite'}\ninclude = {include}\n")
    return [python, "-m", "coverage", "run", f"--rcfile={rcfile}", launcher, *pytest_args]

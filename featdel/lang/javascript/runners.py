"""Run a JavaScript or TypeScript repository's suite in a sandbox; outcomes from featdel's reporter.

In: a `NodeEnv`, the tree to test (the env's checkout, or a modified copy mounted in its place),
which tests, and a sandbox backend. Out: the same `SuiteRun` a pytest run gives
(featdel.env.testrun), keyed by stable ids: the test file's path and the full title path,
`test/math.test.js::sum::adds two numbers`. Files that fail to load are in `collect_errors`,
apart from tests that failed; a run with no complete report is `broken`.

The report channel is pytest's (featdel.env.stream): the host makes a FIFO and a spec file in
the sealed directory, the launcher (reporters/featdel_launch.cjs, read-only, outside the tree)
reads the spec, unlinks it and deletes $FEATDEL_SPEC before the runner loads anything of the
tree, and signs every record with the key it held. The runner runs in the launcher's process
with featdel's reporter given as an object or a path the tree cannot name (never a reporter of
the tree's config), so a test file cannot find the report or stand in for the reporter, and one
that ends the process at import leaves a stream with no end. Which runner, and its arguments,
come from the recipe (featdel.lang.javascript.envs.test_command).

Selections: `options.tests` runs the files of the ids asked, with a name pattern where the
runner has one (mocha's grep, jest's and vitest's testNamePattern, on the escaped full titles);
outcomes are then kept to the ids asked. Coverage: `coverage_to` names a directory that gets the
V8 coverage the run wrote, cut per test where the runner runs tests in a process featdel reaches
(see featdel.lang.javascript.coverage).

Warm or fresh, as `SuiteRunner` (this runner is one, with the node_modules, the reporters and
the launcher in place of the venv and the pytest plugin).
"""

from __future__ import annotations

import glob
import json
import shutil
from importlib import resources
from pathlib import Path

from featdel.env.testrun import RunOptions, SuiteRun, SuiteRunner, _why
from featdel.lang.javascript.envs import NodeEnv, split_node_flags

REPORTER_FILES = ("featdel_launch.cjs", "featdel_cov.cjs", "run_mocha.cjs", "run_jest.cjs", "featdel_jest_reporter.cjs",
                  "run_vitest.cjs", "featdel_vitest_setup.mjs", "run_node_test.cjs", "run_tape.cjs")
_JS = (".js", ".mjs", ".cjs")
_TS = (".ts", ".mts", ".cts")
_NODE_TEST_NAME = r"(^test\.|^test-|[._-]test\.)"


def reporter_dir(env: NodeEnv) -> Path:
    """A copy of the launcher and reporters inside the env (mounted read-only in the sandbox)."""
    target = env.root / "reporters"
    for name in REPORTER_FILES:
        source = resources.files("featdel").joinpath(f"lang/javascript/reporters/{name}").read_text()
        dest = target / name
        if not dest.exists() or dest.read_text() != source:
            target.mkdir(exist_ok=True)
            dest.write_text(source)
    return target


def runner(env: NodeEnv, backend, image: str | None = None) -> NodeRunner:
    """`with runner(env, backend) as r: r.run_suite(options, tree=...)`: one warm sandbox."""
    return NodeRunner(env, backend, image=image, warm=True)


def run_suite(env: NodeEnv, backend, options: RunOptions = RunOptions(), *, tree: Path | None = None) -> SuiteRun:
    """One run in a fresh sandbox."""
    return NodeRunner(env, backend, warm=False).run_suite(options, tree=tree)


class NodeRunner(SuiteRunner):
    """`SuiteRunner` for a `NodeEnv`: the same sandboxes, the same channel, node's command."""

    def run_suite(self, options: RunOptions = RunOptions(), *, tree: Path | None = None) -> SuiteRun:
        from featdel.env.stream import Channel

        if options.tests is not None and not options.tests:
            raise ValueError("an empty test selection runs nothing; pass None for the whole suite")
        with self._dirs() as (out_dir, sealed):
            cover = out_dir / "v8" if options.coverage_to is not None else None
            if cover is not None:
                cover.mkdir()
                cover.chmod(0o777)
            argv = command(self.env, options, tree or self.env.src, cover)
            with Channel(sealed, added=options.added, watch=options.watch) as channel:
                variables = {**self.env.environ(), "HOME": "/tmp", "FEATDEL_SPEC": str(channel.spec)}
                if cover is not None:
                    variables["NODE_V8_COVERAGE"] = str(cover)
                result = self._exec(argv, tree, variables, options.timeout_s, out_dir, sealed)
            stream = channel.stream(ran=True)
            if cover is not None:
                shutil.rmtree(options.coverage_to, ignore_errors=True)
                options.coverage_to.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(cover, options.coverage_to, symlinks=True)
                # V8 names files where the tree was mounted (the env's src), wherever the tree lives
                (options.coverage_to / "mount.txt").write_text(str(self.env.src))
        output = result.stdout + result.stderr
        broken = None
        if stream.problem is not None:
            broken = (f"the suite did not finish within {options.timeout_s:.0f}s" if result.timed_out else
                      f"{self.env.runner} wrote no report (exit {result.exit_code}): {_why(output)}"
                      if stream.start is None else
                      f"{self.env.runner}'s report is incomplete ({stream.problem}; exit {result.exit_code}): {_why(output)}")
        wanted = set(options.tests) if options.tests is not None else None
        tests = {k: v for k, v in stream.tests.items() if wanted is None or k in wanted}
        errors = stream.collect_errors
        return SuiteRun(
            outcomes={k: v["outcome"] for k, v in tests.items()},
            durations={k: v["duration"] for k, v in tests.items()},
            collected=[t for t in stream.collected if wanted is None or t in wanted],
            collect_errors=[e.get("nodeid") or "<session>" for e in errors],
            collect_messages={e.get("nodeid") or "<session>": str(e.get("message", "")) for e in errors},
            exit_code=result.exit_code,
            report_exitstatus=stream.exitstatus,
            trips=stream.trips,
            config=None,
            seconds=result.duration_s,
            timed_out=result.timed_out,
            broken=broken,
            output_tail=output[-4000:],
        )

    def _spec(self, workdir: Path, out_dir: Path, sealed: Path, timeout_s: float):
        from featdel.sandboxes.base import Limits, SandboxSpec

        # an env baked into an image has its node_modules there: only the reporters come from the host
        readonly = (reporter_dir(self.env),) if getattr(self.env, "in_image", False) else (
            self.env.node_modules, reporter_dir(self.env))
        return SandboxSpec(workdir=workdir, mount_at=self.env.src, readonly=readonly,
                           writable=(out_dir,), sealed=(sealed,), image=self.image, limits=Limits(timeout_s=timeout_s))


def command(env: NodeEnv, options: RunOptions, tree: Path, cover: Path | None, *, launcher: str | None = None) -> list[str]:
    """The command line of one run: node, its flags, the launcher (the env's copy, else
    `launcher`: an exported eval script's), the runner and its options."""
    runner, *args = env.recipe.test_cmd
    node_flags: list[str] = []
    if runner == "node-test":
        node_flags, args = split_node_flags(args)
    args = [*args, *options.extra_args]
    files: list[str] = []
    select = None
    if options.tests is not None:
        select = [_parse_id(t) for t in options.tests]
        files = sorted({s["file"] for s in select})
    elif runner in ("tape", "node-test"):
        files = expand(tree, [a for a in args if not a.startswith("-")], runner)
        args = [a for a in args if a.startswith("-")]
    spec = {"args": args, "files": files, "select": select, "coverage": str(cover) if cover else None}
    launcher = launcher or str(reporter_dir(env) / "featdel_launch.cjs")
    return [env.node, *node_flags, launcher, runner, json.dumps(spec)]


def _parse_id(test_id: str) -> dict:
    file, *titles = test_id.split("::")
    return {"file": file, "titles": titles}


def expand(tree: Path, patterns: list[str], runner: str) -> list[str]:
    """The test files a tape or node-test command names, as the shell and the runner would find
    them in `tree`: globs (`**` included), folders (their test files), plain paths; for node-test
    with none, node's own default patterns."""
    import re

    suffixes = (*_JS, *_TS)
    found: list[str] = []

    def add(path: Path) -> None:
        rel = path.relative_to(tree).as_posix()
        if "node_modules" not in path.relative_to(tree).parts and rel not in found:
            found.append(rel)

    for pattern in patterns or (["**/*"] if runner == "node-test" else []):
        matches = sorted(glob.glob(pattern, root_dir=tree, recursive=True)) if glob.has_magic(pattern) else [pattern]
        for match in matches:
            path = tree / match
            if path.is_dir():
                for inner in sorted(path.rglob("*")):
                    if inner.is_file() and inner.suffix in suffixes and (
                            runner == "tape" or re.search(_NODE_TEST_NAME, inner.name) or "test" in inner.relative_to(tree).parts):
                        add(inner)
            elif path.is_file() and (patterns or (path.suffix in _JS and (
                    re.search(_NODE_TEST_NAME, path.name) or "test" in path.relative_to(tree).parts[:-1]))):
                add(path)
    return found

"""The learner's work tree and the tools that act on it.

In: a work tree (the task's start state, no VCS data), the task (for its environment and tests)
and a sandbox backend; then validated `ToolCall`s. Out: an `Observation` per call: the text the
learner sees, whether the call succeeded, and which paths it changed (for the hints). A tool
never raises: a refused path, a missing file or a patch that does not apply is an error
observation.

Paths are confined to the tree: relative, no `..` and no `.git` component, and whatever symlinks
the tree holds (code run by the tests can plant them) the real path must stay inside the tree.
Reading and writing happen here on the host; only `run_tests` executes code, in the sandbox,
through the runner of the task's language (`featdel.grading.grade.run_tests`: pytest for Python,
node's launcher for JavaScript and TypeScript) with the tree mounted where the environment
expects it. Test ids are the language's (`tests/test_a.py::test_x`, `test/a.test.js::suite::it`):
the part before the first `::` is a file of the tree either way.
That code can write anything into the tree, `.git/config` and `.gitattributes` included, so
`apply_patch` runs git through `featdel.code.hostgit` (featdel's own repository and config, none of
the tree's), and after every run the `.git` entries and planted `.gitattributes` are swept out.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from featdel.agent.protocol import ToolCall
from featdel.code import hostgit
from featdel.core.errors import SandboxError
from featdel.grading.grade import GradeTask

MAX_FILE_BYTES = 1 << 20  # read_file refuses bigger files; write_file bigger contents
MAX_LISTING = 500
DIFF_PATH = re.compile(r"^(?:diff --git (\S+) (\S+)|--- (\S+)|\+\+\+ (\S+)|(?:rename|copy) (?:from|to) (.+))$",
                       re.MULTILINE)


class PathRefused(Exception):
    """A path the learner gave points outside the work tree or into what it may not touch."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Observation:
    text: str
    ok: bool = True
    touched: list[str] = field(default_factory=list)  # paths the call wrote
    ran_tests: bool = False
    done: bool = False  # the call ends the episode (submit)


def confine(root: Path, rel: str) -> Path:
    """`root / rel` if it is inside `root` (see the module docstring), else `PathRefused`."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise PathRefused("a path must be a non-empty string")
    pure = PurePosixPath(rel)
    if pure.is_absolute() or rel.startswith("~") or "\\" in rel:
        raise PathRefused(f"{rel!r} is not a path relative to the work tree")
    if ".." in pure.parts or ".git" in pure.parts:
        raise PathRefused(f"{rel!r} leaves the work tree or enters .git")
    real_root = os.path.realpath(root)
    target = os.path.realpath(os.path.join(real_root, *pure.parts))
    if target != real_root and not target.startswith(real_root + os.sep):
        raise PathRefused(f"{rel!r} resolves outside the work tree (through a symlink)")
    return Path(real_root, *pure.parts)


class Workspace:
    """One episode's work tree: `execute(call)` runs a tool on it (`task` and `backend` are
    needed by `run_tests` only)."""

    def __init__(self, root: Path, task: GradeTask | None, backend, *, max_observation: int = 4000,
                 test_timeout_s: float = 120.0):
        self.root, self.task, self.backend = root, task, backend
        self.max_observation, self.test_timeout_s = max_observation, test_timeout_s

    def execute(self, call: ToolCall) -> Observation:
        try:
            obs = getattr(self, f"_{call.name}")(**call.args)
        except PathRefused as exc:
            obs = Observation(text=f"error: {exc}", ok=False)
        except SandboxError as exc:
            obs = Observation(text=f"error: the sandbox failed: {exc}", ok=False, ran_tests=True)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:  # ValueError: UnicodeError too
            obs = Observation(text=f"error: {type(exc).__name__}: {str(exc)[:300]}", ok=False)
        return obs

    def clip(self, text: str) -> str:
        if len(text) <= self.max_observation:
            return text
        keep = self.max_observation - 80
        return text[:keep] + f"\n[... {len(text) - keep} more characters cut: read less at a time]"

    def _list_dir(self, path: str = ".") -> Observation:
        target = self.root if path in (".", "./", "") else confine(self.root, path)
        if not target.is_dir():
            return Observation(text=f"error: {path} is not a directory", ok=False)
        names = sorted(p.name + ("/" if p.is_dir() and not p.is_symlink() else "")
                       for p in target.iterdir() if p.name != ".git")
        more = f"\n[{len(names) - MAX_LISTING} more entries]" if len(names) > MAX_LISTING else ""
        return Observation(text=self.clip("\n".join(names[:MAX_LISTING]) + more) if names else "(empty)")

    def _read_file(self, path: str, start: int = 1, lines: int | None = None) -> Observation:
        target = confine(self.root, path)
        if not target.is_file():
            return Observation(text=f"error: {path} is not a file", ok=False)
        if target.stat().st_size > MAX_FILE_BYTES:
            return Observation(text=f"error: {path} is over {MAX_FILE_BYTES} bytes", ok=False)
        all_lines = target.read_bytes().decode("utf-8", errors="replace").splitlines(keepends=True)
        chosen = all_lines[start - 1 : start - 1 + lines if lines else None]
        return Observation(text=self.clip("".join(chosen)) if chosen else f"({path}: no lines from {start})")

    def _write_file(self, path: str, content: str) -> Observation:
        target = confine(self.root, path)
        if len(content.encode()) > MAX_FILE_BYTES:
            return Observation(text=f"error: content over {MAX_FILE_BYTES} bytes", ok=False)
        if target.is_dir():
            return Observation(text=f"error: {path} is a directory", ok=False)
        target.parent.mkdir(parents=True, exist_ok=True)
        confine(self.root, path)  # mkdir followed no link out: check again before writing
        if target.is_symlink():
            target.unlink()  # replace the link itself, never write through it
        target.write_text(content, encoding="utf-8")
        return Observation(text=f"wrote {path} ({len(content.splitlines())} lines)", touched=[path])

    def _apply_patch(self, patch: str) -> Observation:
        paths = patch_paths(patch)
        if not paths:
            return Observation(text="error: no file headers (diff --git a/... b/..., ---, +++) in the patch", ok=False)
        for rel in paths:
            confine(self.root, rel)
        data = (patch if patch.endswith("\n") else patch + "\n").encode("utf-8", errors="surrogateescape")
        with tempfile.NamedTemporaryFile("wb", suffix=".patch", delete=False) as fh:
            fh.write(data)
        try:
            # featdel's own repository and config: never a .git or .gitattributes the tests planted
            done = hostgit.apply(self.root, Path(fh.name), "--whitespace=nowarn", "--recount", timeout=60)
        finally:
            os.unlink(fh.name)
        if done.returncode != 0:
            why = [ln for ln in done.stderr.replace(fh.name, "<patch>").splitlines() if ln.strip()]
            return Observation(text="error: the patch does not apply: " + " | ".join(why[-3:])[:500], ok=False)
        return Observation(text=f"patched {', '.join(paths)}", touched=paths)

    def _run_tests(self, tests: list[str] | None = None) -> Observation:
        from featdel.env.testrun import RunOptions
        from featdel.grading.grade import run_tests

        if self.task is None:
            return Observation(text="error: this work tree has no task to test", ok=False)
        for node in tests or []:
            confine(self.root, node.split("::", 1)[0])
        chosen = tests or self.visible_failing() or None
        kept = hostgit.gitattributes(self.root)
        try:
            run = run_tests(self.task, self.root, self.backend, RunOptions(tests=chosen, timeout_s=self.test_timeout_s))
        finally:
            hostgit.sweep(self.root, kept)  # no .git or planted .gitattributes outlives the run
        if run.broken:
            text = f"the test run broke: {run.broken}\n{run.output_tail[-1500:]}"
            return Observation(text=self.clip(text), ran_tests=True)
        names = chosen or run.collected
        outcomes = {t: (run.outcomes.get(t, "missing") if t in run.collected else "not collected") for t in names}
        passed = sum(o == "passed" for o in outcomes.values())
        lines = [f"{passed} of {len(outcomes)} tests passed" + (" (timed out)" if run.timed_out else "")]
        lines += [f"{o}: {t}" for t, o in outcomes.items()]
        if passed < len(outcomes):
            lines += ["--- output (tail) ---", run.output_tail[-1500:]]
        return Observation(text=self.clip("\n".join(lines)), ran_tests=True)

    def _submit(self) -> Observation:
        return Observation(text="submitted", done=True)

    def visible_failing(self) -> list[str]:
        """The task's F2P tests whose files are in the tree (a task may hide them)."""
        if self.task is None:
            return []
        return [t for t in self.task.fail_to_pass if (self.root / t.split("::", 1)[0]).is_file()]


def patch_paths(patch: str) -> list[str]:
    """Every path a unified diff names (a/ and b/ prefixes stripped, /dev/null left out)."""
    out: list[str] = []
    for match in DIFF_PATH.finditer(patch):
        for raw in match.groups():
            if raw is None:
                continue
            raw = raw.split("\t", 1)[0].strip()
            if raw == "/dev/null":
                continue
            rel = raw[2:] if raw[:2] in ("a/", "b/") else raw
            if rel not in out:
                out.append(rel)
    return out

"""`featdel export --format swebench`: SWE-bench rows that SWE-bench's own harness runs.

In: a packaged run directory. Out: JSON Lines, one row per task, with the columns swebench 5.x's
harness reads (`instance_id`, `repo`, `version`, `base_commit`, `patch`, `test_patch`,
`problem_statement`, `FAIL_TO_PASS` and `PASS_TO_PASS` as real lists, `image`, `log_parser`,
`eval_type`, `eval_script`), `image_name` (the same image, for SkyRL and older readers) and
featdel's own: `deletion_patch`, `env_id`, `env_image`, `strategy`.

`image` is the task's start-state image (`featdel env build RUN --sandbox docker --tasks`):
the env's venv at /opt/featdel/venv and the start state at /testbed as a one-commit git
repository, where the harness applies a prediction with `git apply`. The image has no `patch`,
the harness's last fallback, which writes what `git apply` refuses (`.git/config`).

The eval script runs in that image, as root, after the model patch (docs/interop.md). Root's
Python runs only isolated (`-I`) outside the tree. It (1) restores the task's tests and test
configuration, the files `featdel.grading.grade` never takes from a patch, from an archive inside
the script (a protected file the patch added goes); (2) runs FAIL_TO_PASS and PASS_TO_PASS as uid
65532 through featdel's launcher, report plugin, signed channel and tripwire, with the host
(`env/pytest_plugin/featdel_host.py`) finding the lines the patch added against the start state's
git blobs; (3) prints one `PASSED <id>` or `FAILED <id>` line per test between the harness's
`>>>>> Start Test Output` and `>>>>> End Test Output` markers, PASSED only when the whole run
resolved, then pytest's own output, each line behind `| `; (4) exits 0 only when resolved, 1
otherwise, 2 when the tree is not there (for readers that go by the exit status: SkyRL, Harbor's
test.sh). `featdel evaluate` adds a static scan of the patch and stays the stricter grader.

A JavaScript/TypeScript task's script (`_node_eval_script`) is the same four steps in its env
image (`featdel env build --sandbox docker`: node at /usr/local/bin, the locked install at
/node_modules), with the language's protected files restored (its tests, runner and transpiler
configuration, package.json, locks, anything under node_modules), node running the runner through
featdel's launcher and reporters (carried in the script, as for pytest) and the same host reading
the signed channel; its ids hold spaces (`test/a.test.js::suite::adds two`), so its rows get the
verbatim parser.

`log_parser` is swebench's pytest parser, which reads a line's second word as the id; a task
with a test id holding whitespace (a parametrised `test_x[a b]`) gets its jest-json parser, which
reads the rest of a `[PASSED] ` line, and the script prints that form. A task no row can hold (an
instance id that is not a docker name, a test id spanning lines) is left out and named.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tempfile
from importlib import resources
from pathlib import Path, PurePosixPath

from featdel.code import trees
from featdel.code.imports import imported_test_files
from featdel.code.spans import is_doctest
from featdel.core.shards import EnvRow, TaskRow, image_tag
from featdel.env.envbuild import TESTBED, VENV
from featdel.env.pytestconfig import find_config
from featdel.env.taskimage import task_image_tag
from featdel.grading.grade import MAX_IDS_ON_COMMAND_LINE, PROTECTED_NAMES, files_of_tests, protected
from featdel.interop.exported import Exported, write_atomic
from featdel.sandboxes.base import SANDBOX_UID

START_MARKER, END_MARKER = ">>>>> Start Test Output", ">>>>> End Test Output"  # SWE-bench's
EVAL_TYPE = "pass_and_fail"  # swebench.harness.constants.EvalType
TEST_UID = SANDBOX_UID  # the `sandbox` user of every featdel image: the tests run as it
# swebench.harness.log_parsers.PARSER_REGISTRY: its pytest parser takes a line's second word as the
# id; the jest-json one takes the rest of a `[PASSED] ` line, so it holds ids with spaces.
PYTEST_PARSER, VERBATIM_PARSER = "parse_log_pytest", "parse_log_jest_json"

_RESTORE = """import base64, io, os, sys, tarfile
root, names, tests, keep = sys.argv[1], set(@NAMES@), set(@TEST_FILES@), set(@KEEP@)
def protected(rel):  # featdel.grading.grade.protected
    parts = rel.split("/"); name = parts[-1]
    return (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py" or rel in tests or name in names
            or name.endswith(".pth"))
for dirpath, dirs, files in os.walk(root):
    if dirpath == root:
        dirs[:] = [d for d in dirs if d != ".git"]
    for name in files + [d for d in dirs if os.path.islink(os.path.join(dirpath, d))]:
        rel = os.path.relpath(os.path.join(dirpath, name), root)
        if protected(rel) and rel not in keep:
            os.unlink(os.path.join(dirpath, name))  # the patch added it: the task has no such file
with tarfile.open(fileobj=io.BytesIO(base64.b64decode(@ARCHIVE@))) as tar:
    for member in tar.getmembers():
        parts = member.name.split("/")
        for i in range(1, len(parts)):  # a folder on the way that is a link (or a file) goes first
            folder = os.path.join(root, *parts[:i])
            if os.path.islink(folder) or (os.path.lexists(folder) and not os.path.isdir(folder)):
                os.unlink(folder)
        path = os.path.join(root, member.name)
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
    try:
        tar.extractall(root, filter="data")
    except TypeError:  # an interpreter from before extraction filters; the archive is the task's own
        tar.extractall(root)
"""



def graded_tree(task: TaskRow, env: EnvRow, dest: Path, *, with_tests: bool = True) -> Path:
    """The start state (with `test_patch` applied unless `with_tests` is false): what grading
    tests, before the model's edits. A one-commit git repository, as `featdel materialize` writes."""
    trees.start_state_of(env.snapshot, task.deletion_patch, dest)
    if with_tests and task.test_patch:
        trees.apply_patch(dest, task.test_patch)
    return dest


def log_parser(task: TaskRow) -> str:
    """The pytest parser, unless a test id holds whitespace, which it would split."""
    ids = [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]
    return PYTEST_PARSER if all(len(t.split()) == 1 for t in ids) else VERBATIM_PARSER


def inexpressible(task: TaskRow) -> str | None:
    """Why no SWE-bench row can hold the task, or None. The harness names a container after the
    id; the verbatim parser strips a line, so an id cannot begin or end in whitespace or span lines."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", task.instance_id):
        return f"instance id {task.instance_id!r} is not a docker container name"
    for t in [*task.FAIL_TO_PASS, *task.PASS_TO_PASS]:
        if t != t.strip() or "\n" in t or "\r" in t:
            return f"test id {t!r} begins or ends in whitespace or spans lines"
    return None


def _files_archive(tree: Path, rels: list[str]) -> str:
    return base64.b64encode(trees.targz(tree, rels)).decode()


def _fill(template: str, **values) -> str:
    """Python literals in place of @NAME@, in one pass (a value never gets substituted into)."""
    return re.sub(r"@([A-Z_0-9]+)@", lambda m: repr(values[m[1]]), template)


def _heredoc(tag: str, text: str) -> str:
    assert f"\n{tag}\n" not in f"\n{text}\n"
    return f"<<'{tag}'\n{text.rstrip()}\n{tag}"


def eval_script(task: TaskRow, env: EnvRow) -> str:
    """The bash script described in the module docstring, for one task row and its env row."""
    if task.language != "python":
        return _node_eval_script(task, env)
    f2p, p2p = list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS)
    test_files = sorted(files_of_tests(f2p + p2p))
    with tempfile.TemporaryDirectory(prefix="featdel-export-") as tmp:
        tree = graded_tree(task, env, Path(tmp) / "tree")
        rels = trees.changed_files(Path(tmp) / "empty", tree)
        keep = sorted(rel for rel in rels if protected(rel, set(test_files)))
        archive = _files_archive(tree, keep)
        own = files_of_tests([t for t in f2p if not is_doctest(t)])
        watch = sorted(set(own) | imported_test_files(tree, own))  # as featdel.grading.grade.watched_files
        start = {rel: _blob_id((tree / rel).read_bytes()) for rel in rels
                 if rel.endswith(".py") and (tree / rel).is_file() and not (tree / rel).is_symlink()}
        config = find_config(tree, f2p + p2p)
    restore = _fill(_RESTORE, NAMES=sorted(PROTECTED_NAMES), TEST_FILES=test_files, KEEP=keep, ARCHIVE=archive)
    by_ids = len(f2p) + len(p2p) <= MAX_IDS_ON_COMMAND_LINE
    test_cmd = list(task.test_cmd)
    if test_cmd[:3] != ["python", "-m", "pytest"]:
        raise ValueError(f"{task.instance_id}: test command must start with `python -m pytest`: {test_cmd}")
    args = test_cmd[3:]
    if config is not None:  # only the configuration the task names: pytest never looks for another
        root = str(PurePosixPath(TESTBED, config).parent)
        args += ["-c", f"{TESTBED}/{config}", f"--rootdir={root}", f"--confcutdir={root}"]
    args += ["--", *f2p, *p2p] if by_ids else []
    run = {"testbed": str(TESTBED), "uid": TEST_UID, "timeout": int(task.timeout_s or 600), "args": args,
           "config": f"{TESTBED}/{config}" if config else None, "python": f"{VENV}/bin/python",
           "environ": {"PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin", "VIRTUAL_ENV": str(VENV),
                       "PYTHONDONTWRITEBYTECODE": "1", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8"},
           "fail_to_pass": f2p, "pass_to_pass": p2p, "by_ids": by_ids,
           "verbatim": log_parser(task) == VERBATIM_PARSER, "start": start,
           "watch": watch}
    carried = {name: resources.files("featdel").joinpath(f"env/pytest_plugin/{name}").read_text()
               for name in ("featdel_launch.py", "featdel_report.py", "featdel_host.py")}
    carried["featdel_stream.py"] = resources.files("featdel").joinpath("env/stream.py").read_text()
    carried["run.json"] = json.dumps(run, sort_keys=True)
    return _script(task, restore, carried, python="python", runner="pytest",
                   exports=f"PATH={VENV}/bin:$PATH VIRTUAL_ENV={VENV} PYTHONDONTWRITEBYTECODE=1 PYTHONHASHSEED=0 LANG=C.UTF-8",
                   carries="launcher, report plugin and host (featdel.env.stream, pytest_plugin/featdel_host.py)")


# A JavaScript task's protected files (featdel.grading.grade.protected with its language): Python's
# rule, then the language's test files, runner and transpiler configuration, and node_modules.
_NODE_PROTECTED = """import re
js_dirs, js_names, js_pattern = set(@JS_DIRS@), set(@JS_NAMES@), re.compile(@JS_PATTERN@)
def protected(rel):  # featdel.grading.grade.protected, language javascript
    parts = rel.split("/"); name = parts[-1]
    if (any(p in ("tests", "test", "testing") for p in parts[:-1]) or name.startswith("test_")
            or name.endswith("_test.py") or name == "conftest.py" or rel in tests or name in names
            or name.endswith(".pth")):
        return True
    return (any(p in js_dirs for p in parts[:-1]) or ".test." in name or ".spec." in name
            or name.split(".", 1)[0] in ("test", "tests", "spec") or "node_modules" in parts
            or any("/".join(parts[:i + 1]) in tests or p in js_names or js_pattern.match(p)
                   for i, p in enumerate(parts)))
"""
_PY_PROTECTED = _RESTORE[_RESTORE.index("def protected(rel):"):_RESTORE.index("for dirpath, dirs, files")]


def _node_eval_script(task: TaskRow, env: EnvRow) -> str:
    """`eval_script` for a JavaScript/TypeScript task: the same restore, channel and verdict, the
    runner started by node through featdel's launcher and reporters (featdel.lang.javascript),
    carried in the script. The env image holds node at /usr/local/bin and the locked install at
    /node_modules, which node finds by walking up from /testbed."""
    from featdel.env.testrun import RunOptions
    from featdel.lang.javascript import PROTECTED_NAMES as JS_NAMES
    from featdel.lang.javascript import PROTECTED_PATTERN
    from featdel.lang.javascript.rebuild import ImageNodeEnv, image_environ
    from featdel.lang.javascript.runners import REPORTER_FILES, command
    from featdel.lang.javascript.syntax import TEST_DIRS

    f2p, p2p = list(task.FAIL_TO_PASS), list(task.PASS_TO_PASS)
    test_files = sorted(files_of_tests(f2p + p2p))
    by_ids = len(f2p) + len(p2p) <= MAX_IDS_ON_COMMAND_LINE
    with tempfile.TemporaryDirectory(prefix="featdel-export-") as tmp:
        tree = graded_tree(task, env, Path(tmp) / "tree")
        rels = trees.changed_files(Path(tmp) / "empty", tree)
        keep = sorted(rel for rel in rels if protected(rel, set(test_files), task.language))
        archive = _files_archive(tree, keep)
        own = files_of_tests([t for t in f2p if not is_doctest(t)])
        watch = sorted(set(own) | imported_test_files(tree, own))  # as featdel.grading.grade.watched_files
        start = {rel: _blob_id((tree / rel).read_bytes()) for rel in rels
                 if rel.endswith(".py") and (tree / rel).is_file() and not (tree / rel).is_symlink()}
        in_image = ImageNodeEnv(root=Path(tmp), recipe=env.recipe(), image=image_tag(env.env_id))
        argv = command(in_image, RunOptions(tests=f2p + p2p if by_ids else None), tree, None,
                       launcher="@WORK@/featdel_launch.cjs")
    restore = _fill(_RESTORE.replace(_PY_PROTECTED, _NODE_PROTECTED), NAMES=sorted(PROTECTED_NAMES),
                    TEST_FILES=test_files, KEEP=keep, ARCHIVE=archive, JS_DIRS=sorted(TEST_DIRS),
                    JS_NAMES=sorted(JS_NAMES), JS_PATTERN=PROTECTED_PATTERN.pattern)
    run = {"testbed": str(TESTBED), "uid": TEST_UID, "timeout": int(task.timeout_s or 600), "argv": argv,
           "environ": image_environ(), "fail_to_pass": f2p, "pass_to_pass": p2p, "by_ids": by_ids,
           "verbatim": log_parser(task) == VERBATIM_PARSER, "start": start, "watch": []}
    carried = {name: resources.files("featdel").joinpath(f"lang/javascript/reporters/{name}").read_text()
               for name in REPORTER_FILES}
    carried["featdel_host.py"] = resources.files("featdel").joinpath("env/pytest_plugin/featdel_host.py").read_text()
    carried["featdel_stream.py"] = resources.files("featdel").joinpath("env/stream.py").read_text()
    carried["run.json"] = json.dumps(run, sort_keys=True)
    return _script(task, restore, carried, python="python3", runner=in_image.runner,
                   exports="PATH=/node_modules/.bin:$PATH LANG=C.UTF-8",
                   carries="launcher, reporters and host (featdel.env.stream, lang/javascript/reporters)")


def _script(task: TaskRow, restore: str, carried: dict[str, str], *, python: str, runner: str, exports: str,
            carries: str) -> str:
    script = "\n".join([
        "#!/bin/bash",
        f"# featdel eval script for {task.instance_id}: run in {task_image_tag(task.instance_id)} (the start",
        f"# state at {TESTBED}) after the model patch. Exit 0: resolved; 1: not resolved; 2: no tree.",
        "set -uo pipefail",
        f"[ -d {TESTBED} ] || exit 2",
        f"export {exports}",
        'WORK=$(mktemp -d) && cd "$WORK" || exit 2',
        "# Python runs here as root only isolated (-I) and from outside the tree: nothing in it is imported.",
        "# 1. The task's tests and test configuration; the patch's edits to them do not count.",
        f'{python} -I - {TESTBED} {_heredoc("FEATDEL_RESTORE", restore)}',
        "[ $? -eq 0 ] || exit 2",
        f"# 2. featdel's {carries}.",
        *(f'cat > "$WORK/{name}" {_heredoc("FEATDEL_FILE", text)}' for name, text in carried.items()),
        'chmod 755 "$WORK" && chmod 644 "$WORK"/*',
        "# 3. FAIL_TO_PASS and PASS_TO_PASS through featdel's signed channel, the tests as uid "
        f"{TEST_UID} when root;",
        "#    the host prints one status line per test between SWE-bench's markers (its harness reads them and",
        "#    records the status of the line before the end marker: the verdict).",
        f": '{START_MARKER}'",  # `:` so the harness's `set -x` prints each marker once
        f'{python} -I "$WORK/featdel_host.py" "$WORK/run.json" "$WORK" 2>"$WORK/verdict.txt"',
        "verdict=$?",
        "(exit $verdict)",
        f": '{END_MARKER}'",
        'cat "$WORK/verdict.txt"',
        f"# {runner}'s own output last, each line behind '| ': the tested code prints what it likes.",
        f'echo "{runner} output (last 4000 bytes):"',
        "tail -c 4000 \"$WORK/output.txt\" | sed -e 's/>>>>>/>>>>/g' -e 's/^/| /'",
        'cd / && rm -rf "$WORK"',
        "exit $verdict",
        "",
    ])
    # SkyRL runs the script as `bash <<'EOF'`; SWE-bench's harness edits the line holding its end marker.
    assert "\nEOF\n" not in script and script.count(END_MARKER) == 1, task.instance_id
    return script


def _blob_id(data: bytes) -> str:
    """git's id of a file's content (featdel_host reads the start state's blobs by it)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def row(task: TaskRow, env: EnvRow) -> dict:
    """One SWE-bench row (see the module docstring)."""
    return {
        "instance_id": task.instance_id, "repo": task.repo, "base_commit": task.base_commit,
        "environment_setup_commit": task.environment_setup_commit, "version": "featdel",
        "patch": task.patch, "test_patch": task.test_patch or "",
        "problem_statement": task.problem_statement, "hints_text": task.hints_text or "",
        "created_at": task.created_at.isoformat() if task.created_at is not None else "",
        "FAIL_TO_PASS": list(task.FAIL_TO_PASS), "PASS_TO_PASS": list(task.PASS_TO_PASS),
        "image": task_image_tag(task.instance_id), "image_name": task_image_tag(task.instance_id),
        "log_parser": log_parser(task), "eval_type": EVAL_TYPE, "eval_script": eval_script(task, env),
        "deletion_patch": task.deletion_patch, "env_id": task.env_id, "env_image": image_tag(task.env_id),
        "strategy": task.strategy,
    }


def tasks_and_envs(run_dir: Path) -> list[tuple[TaskRow, EnvRow]]:
    """Every task of a packaged run with its env row (a one-line error when it is not packaged)."""
    from featdel.core.rundir import RunDir
    from featdel.core.shards import env_rows, task_rows

    rd = RunDir(run_dir)
    rd.need(rd.tasks_dir, f"run `featdel package {run_dir}` first")
    envs = {e.env_id: e for e in env_rows(run_dir)}
    return [(t, envs[t.env_id]) for t in task_rows(run_dir)]


def rows(run_dir: Path) -> tuple[list[dict], dict[str, str]]:
    """(SWE-bench rows, {instance_id: why not} for the tasks a row cannot express)."""
    out, left_out = [], {}
    for task, env in tasks_and_envs(run_dir):
        if why := inexpressible(task):
            left_out[task.instance_id] = why
        else:
            out.append(row(task, env))
    return out, left_out


def export(run_dir: Path, out: Path) -> Exported:
    """Write the rows to `out` (JSON Lines)."""
    data, left_out = rows(run_dir)
    write_atomic(out, "".join(json.dumps(r, sort_keys=True) + "\n" for r in data).encode())
    return Exported(written=len(data), left_out=left_out)

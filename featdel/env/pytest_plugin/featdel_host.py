"""The host side of an exported eval script's test run (featdel.interop.swebench). Standard
library only: the eval script carries this file, featdel.env.stream (as featdel_stream.py) and
the launcher and plugin, and runs it as root with `python -I`, outside the tree.

In: `featdel_host.py RUN_JSON WORK`: the run (the tree, the pytest arguments, the task's tests,
the start state's `.py` files as git blob ids) and the folder this file is in. A JavaScript
task's run names its `argv` instead (node, the launcher and reporters carried beside this file,
the runner, the tests), through the same channel; its added lines go unchecked (the tripwire is
Python's), and the eval script's restore step is what keeps its tests and configuration. Out: one status line per test on
stdout, in the form of the row's SWE-bench log parser; the reason on stderr; exit 0 when the
task is resolved, 1 when not.

What it does, as `featdel evaluate` does on its own host: it finds the lines the patch added
(each changed `.py` file against the start state's blob, read by its id from the start state's
git directory outside the tree; a compiled module in the tree leaves the task unresolved), opens
featdel's signed channel (a FIFO in a folder the tests can enter but not list) and runs the tests
through the launcher, as the unprivileged uid when run as root, so the tripwire reports what added
lines do to the test process. Only the channel counts: a record not signed with the run's key, a
stream that stops, a tripwire or a config pytest was not told to read leaves the task unresolved.
Afterwards every process of that uid is killed.
"""

import difflib
import hashlib
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # -I leaves this folder out

from featdel_stream import Channel  # noqa: E402  (featdel.env.stream, beside this file)


def blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_blob(gitdir: str, sha: str):
    """A loose object's content from the start state's git directory (outside the tree), or None;
    its id is checked, so nothing can pass off other bytes as the start state's."""
    try:
        with open(os.path.join(gitdir, "objects", sha[:2], sha[2:]), "rb") as fh:
            raw = zlib.decompress(fh.read())
    except (OSError, zlib.error):
        return None
    if hashlib.sha1(raw).hexdigest() != sha or not raw.startswith(b"blob "):
        return None
    return raw[raw.index(b"\0") + 1:]


COMPILED = (".pyc", ".pyo", ".so", ".pyd")  # code the tripwire cannot attribute; the start state has none


def source_lines(data: bytes) -> list:
    """The lines of a source file as Python's tokenizer numbers them (\\n, \\r\\n or \\r end a
    line; str.splitlines would also split at characters such as \\x1c)."""
    return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")


def added_lines(testbed: str, gitdir: str, start: dict) -> tuple:
    """({relative path: [line numbers]} for the lines of files, symlinks included, that differ
    from the start state (`start`: relative path -> blob id; a file the start state lacks, or whose
    blob is gone, counts whole), the compiled files in the tree)."""
    out, compiled = {}, []
    # Linked folders are followed (a module can load through one, under the link's path); a link
    # back to a folder above it is not (a cycle).
    for dirpath, dirs, files in os.walk(testbed, followlinks=True):
        above, parent = set(), dirpath
        while parent.startswith(testbed) and parent != os.path.dirname(parent):
            parent = os.path.dirname(parent)
            above.add(os.path.realpath(parent))
        if os.path.realpath(dirpath) in above:
            dirs[:] = []
            continue
        dirs[:] = [d for d in dirs if not (dirpath == testbed and d == ".git")]
        for name in files:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, testbed)
            if name.endswith(COMPILED):
                compiled.append(rel)
                continue
            try:
                with open(path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
            if start.get(rel) == blob_id(data) and not os.path.islink(path):
                continue
            new = source_lines(data)
            old_bytes = read_blob(gitdir, start[rel]) if rel in start else None
            if old_bytes is None or os.path.islink(path):
                lines = list(range(1, len(new) + 1))
            else:
                matcher = difflib.SequenceMatcher(None, source_lines(old_bytes), new, autojunk=False)
                lines = [j + 1 for tag, _, _, j1, j2 in matcher.get_opcodes() if tag in ("replace", "insert")
                         for j in range(j1, j2)]
            if lines:
                out[rel] = lines
    return out, compiled


def imports_tests(testbed: str, added: dict):
    """An added line that imports the tests (a test_* or *_test module, conftest, a `tests`
    package: featdel.grading.tamper's `test-import`), as "path:line", or None: an implementation
    never reads the tests' data, an oracle does."""
    import ast

    def is_test(dotted: str) -> bool:
        return any(p.startswith("test_") or p.endswith("_test") or p in ("conftest", "tests")
                   for p in dotted.split(".") if p)

    for rel, lines in added.items():
        try:
            with open(os.path.join(testbed, rel), "rb") as fh:
                tree = ast.parse(fh.read())
        except (OSError, SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module or ''}.{a.name}" for a in node.names]
            else:
                continue
            if node.lineno in lines and any(is_test(n) for n in names):
                return f"{rel}:{node.lineno}"
    return None


def verdict(stream, run: dict, code: int) -> tuple[dict, str | None]:
    """({test: outcome}, why the task is not resolved, or None)."""
    ids = run["fail_to_pass"] + run["pass_to_pass"]
    known = set(stream.collected)
    outcomes = {t: stream.tests.get(t, {}).get("outcome", "missing") if t in known else "missing" for t in ids}
    bad = [t for t, outcome in outcomes.items() if outcome != "passed"]
    if stream.problem is not None:
        return outcomes, f"the run's report is not one featdel's plugin wrote in full: {stream.problem}"
    if stream.trips:
        return outcomes, f"the run was tampered with: {stream.trips[0]}"
    if bad:
        return outcomes, f"{len(bad)} tests did not pass, e.g. {bad[0]}"
    if stream.exitstatus != code:
        return outcomes, f"the report says pytest exited {stream.exitstatus}, the process exited {code}"
    if run["by_ids"] and code != 0:
        return outcomes, f"every test passed but pytest exited {code}"
    return outcomes, None


def main() -> int:
    with open(sys.argv[1]) as fh:
        run = json.load(fh)
    testbed, work, uid = run["testbed"], sys.argv[2], run["uid"]
    args, config = list(run.get("args") or []), run.get("config")
    # Another language's run (featdel.lang) names its whole command: node, featdel's launcher
    # beside this file (@WORK@), the runner and what it runs; no pytest configuration.
    command = [a.replace("@WORK@", work) for a in run["argv"]] if "argv" in run else None
    if config is None and command is None:  # the tree has no config of its own: pytest reads an empty one, not one it finds
        config = os.path.join(work, "empty", "pytest.ini")
        os.makedirs(os.path.dirname(config), mode=0o755)
        with open(config, "w") as fh:
            fh.write("[pytest]\n")
        os.chmod(config, 0o644)
        cut = args.index("--") if "--" in args else len(args)
        args[cut:cut] = ["-c", config, f"--rootdir={testbed}", f"--confcutdir={testbed}"]
    as_user = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs"] \
        if os.geteuid() == 0 else []
    sealed = os.path.join(work, "sealed")
    os.mkdir(sealed, 0o733)
    os.chmod(sealed, 0o733)  # the tests' uid can open the channel by name, never list the folder
    added, compiled = added_lines(testbed, os.path.join(testbed, ".git"), run["start"])
    test_import = imports_tests(testbed, added)
    refused = (f"the tree holds compiled code the start state does not: {compiled[0]}" if compiled else
               f"the patch imports the tests at {test_import}" if test_import else None)
    if refused:
        for t in run["fail_to_pass"] + run["pass_to_pass"]:
            print(f"[FAILED] {t}" if run["verbatim"] else f"FAILED {t} - refused")
        print(f"UNRESOLVED: {refused}", file=sys.stderr)
        return 1
    if as_user:
        subprocess.run(["chown", "-R", f"{uid}:{uid}", testbed], check=False)
    env = {**run["environ"], "HOME": "/tmp"}
    with Channel(Path(sealed), added=added, config=config, watch=run["watch"]) as ch:
        env["FEATDEL_SPEC"] = str(ch.spec)
        with open(os.path.join(work, "output.txt"), "wb") as out:
            command = command or [run["python"], os.path.join(work, "featdel_launch.py"), *args]
            code = subprocess.run(["timeout", str(run["timeout"]), *as_user, *command],
                                  cwd=testbed, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL).returncode
        if as_user:
            subprocess.run([*as_user, "kill", "-9", "-1"], stderr=subprocess.DEVNULL, check=False)
    outcomes, why = verdict(ch.stream(), run, code)
    for t, outcome in outcomes.items():
        if run["verbatim"]:  # parse_log_jest_json: the rest of the line is the id, spaces and all
            print(f"[PASSED] {t}" if why is None else f"[FAILED] {t}")
        else:  # parse_log_pytest: the second word is the id
            print(f"PASSED {t}" if why is None else f"FAILED {t} - {outcome}")
    print(f"UNRESOLVED: {why}" if why else "RESOLVED", file=sys.stderr)
    return 1 if why else 0


if __name__ == "__main__":
    sys.exit(main())

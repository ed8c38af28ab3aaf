"""A real `Check` for deletion strategies in the tests: does the edited tree still compile and import?

In: the original repository (never written) and a strategy's proposed edits. Out: True, or a
one-line reason. Each call copies the tree into a temporary directory, applies the edits,
compiles every Python file in-process (no code runs) and imports every package module in one
subprocess (`sys.executable`, argv list, timeout) with the copy first on `sys.path`. A module
that already failed to import in the original tree (optional dependency missing) is ignored, so
only breakage the edit caused counts. With `collect=True` it also runs `pytest --collect-only`,
FeatureBench's criterion. It runs the repository's import-time code unsandboxed, so it is for
the tests only; the pipeline brings its own sandboxed check (featdel.pipeline.context).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from featdel.code.imports import module_name
from featdel.code.spans import is_test_path, python_files
from featdel.deletion.base import Check, Edits

# A module that resolves outside the copy (an editable install's finder, a site-packages copy)
# would make every edit look harmless, R2E-Gym's no-op failure: report it, never pass it.
_IMPORT_ALL = """
import importlib, json, os, sys
here = os.path.realpath(os.getcwd()) + os.sep
failed, outside = {}, {}
for name in sys.argv[1:]:
    try:
        module = importlib.import_module(name)
    except BaseException as exc:
        failed[name] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
        continue
    path = getattr(module, "__file__", None)
    if path and not os.path.realpath(path).startswith(here):
        outside[name] = path
print(json.dumps({"failed": failed, "outside": outside}))
"""

_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", ".tox", ".nox", "*.pyc")


def package_modules(root: Path) -> dict[str, str]:
    """Every non-test module inside a package (a dir with `__init__.py`): dotted name -> path."""
    rels = [p.relative_to(root).as_posix() for p in python_files(root)]
    paths = set(rels)
    names = {}
    for rel in rels:
        name = module_name(rel, paths)
        if name is None or is_test_path(rel) or "." not in name and not rel.endswith("__init__.py"):
            continue
        if name.rpartition(".")[2] in ("__main__", "conftest", "setup"):
            continue
        names.setdefault(name, rel)
    return dict(sorted(names.items()))


def _materialize(root: Path, edits: Edits, dest: Path) -> None:
    from featdel.code.trees import apply_edits

    shutil.copytree(root, dest, ignore=_IGNORE, symlinks=True)
    apply_edits(dest, edits)


def _syntax_errors(tree: Path) -> str | None:
    for path in python_files(tree):
        try:
            compile(path.read_bytes(), str(path), "exec", dont_inherit=True)
        except (SyntaxError, ValueError) as exc:
            why = str(exc).replace(str(tree), "<repo>")
            return f"{path.relative_to(tree).as_posix()}: {type(exc).__name__}: {why}"
    return None


def _run(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    src = [str(cwd / "src")] if (cwd / "src").is_dir() else []
    env["PYTHONPATH"] = os.pathsep.join([str(cwd), *src])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def import_check(
    root: Path,
    *,
    modules: list[str] | None = None,
    collect: bool = False,
    timeout: float = 60.0,
) -> Check:
    """A `Check` for the tree at `root`; answers are cached by the edits' content."""
    root = Path(root)
    found = package_modules(root)
    mods = {m: found.get(m, "") for m in modules} if modules is not None else found
    cache: dict[str, bool | str] = {}
    baseline: dict[str, str] = {}

    def failures(edits: Edits) -> dict[str, str] | str:
        with tempfile.TemporaryDirectory(prefix="featdel-check-") as tmp:
            tree = Path(tmp) / "repo"
            _materialize(root, edits, tree)
            if error := _syntax_errors(tree):
                return error
            try:
                wanted = [m for m, rel in mods.items() if not (rel in edits and edits[rel] is None)]
                proc = _run([sys.executable, "-c", _IMPORT_ALL, *wanted], tree, timeout)
                if proc.returncode != 0:
                    tail = proc.stderr.strip()[-300:].replace(str(tree), "<repo>")
                    return f"import run exited {proc.returncode}: {tail}"
                report = json.loads(proc.stdout.strip().splitlines()[-1])
                if report["outside"]:
                    name, path = sorted(report["outside"].items())[0]
                    return f"{name} imports from {path}, not the edited copy (an installed copy shadows it)"
                failed = report["failed"]
                if collect:
                    argv = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
                    col = _run(argv, tree, timeout)
                    if col.returncode not in (0, 5):  # 5: nothing collected
                        tail = (col.stdout.strip().splitlines() or ["error"])[-1]
                        failed["<pytest --collect-only>"] = tail[:200]
            except subprocess.TimeoutExpired:
                return f"import timed out after {timeout:.0f}s"
            # reasons name the temporary copy: make them stable so answers are reproducible
            return {m: why.replace(str(tree), "<repo>") for m, why in failed.items()}

    def check(edits: Edits) -> bool | str:
        key = hashlib.sha1(json.dumps(edits, sort_keys=True).encode()).hexdigest()
        if key in cache:
            return cache[key]
        if not baseline:
            base = failures({})
            baseline.update(base if isinstance(base, dict) else {"<baseline>": base})
            baseline.setdefault("<computed>", "")
        found = failures(edits)
        if isinstance(found, str):
            cache[key] = found
        else:
            new = {m: why for m, why in sorted(found.items()) if m not in baseline}
            cache[key] = True if not new else "; ".join(f"{m}: {why}" for m, why in new.items())
        return cache[key]

    return check

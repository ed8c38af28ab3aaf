"""Bytecode compiled once per repository, reused by every test run of its candidates.

A test run imports the tree's modules and pytest rewrites and compiles its test files, every
run anew: runs write no bytecode (`PYTHONDONTWRITEBYTECODE`), and each gets a fresh copy of its
tree. On toolz's suite that compiling is more than half of a run (1.2 s against 0.5 s with the
bytecode in place). So one collection of the original tree (`harvest`), in the sandbox with
bytecode writing on, keeps the `.pyc` files Python and pytest wrote, and `overlay` puts them into
a candidate's tree beside every source file the candidate left unchanged. The harvest is kept in
the run directory (`save`, `load`: the delete stage's serves verification), keyed by the
snapshot's digest and the environment.

Why this is safe:
- The run that writes them is of the original tree, the repository's own code, which mining
  already ran in its baselines; no candidate's or learner's code has run in it.
- A pyc is used only when the source's mtime and size match what it recorded. Every tree comes
  from the same snapshot, whose files all have mtime 0, and a file a deletion changes is written
  anew (current mtime), so its pyc would be ignored; `overlay` does not even write it, so the
  original's compiled code of a changed file is nowhere in a candidate's tree.
- Only verification's runs get them (the build check, the F2P runs, the stub variants, and the
  grader's no-op and gold runs, through `grade(..., bytecode=)`); the tree a learner's patch is
  graded on and the audited, hashed start state do not.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from featdel.code import trees
from featdel.env.testrun import RunOptions, SuiteRunner

# dir/__pycache__/name.cpython-311.pyc, or pytest's dir/__pycache__/name.cpython-311-pytest-8.3.4.pyc
_PYC = re.compile(r"^(?P<stem>[^.]+)\.[a-z]+-\d+(?:-pytest-[\w.]+)?\.pyc$")


def source_of(rel: str) -> str | None:
    """The source file a `__pycache__` entry was compiled from, or None if it is not one."""
    path = PurePosixPath(rel)
    match = _PYC.match(path.name)
    if match is None or path.parent.name != "__pycache__":
        return None
    return str(path.parent.parent / f"{match['stem']}.py").removeprefix("./")


def harvest(runner: SuiteRunner, original: Path, work: Path, timeout_s: float) -> dict[str, bytes]:
    """pyc path -> its bytes, from collecting the whole suite on a copy of `original` (never
    written itself) with bytecode writing on. Nothing when the collection breaks: runs then
    compile as before."""
    tree = trees.copy_tree(original, work / "bytecode")
    run = runner.run_suite(RunOptions(collect_only=True, write_bytecode=True, timeout_s=timeout_s), tree=tree)
    if run.broken:
        return {}
    out = {}
    for pyc in sorted(tree.rglob("__pycache__/*.pyc")):
        rel = pyc.relative_to(tree).as_posix()
        source = source_of(rel)
        if source is not None and pyc.is_file() and not pyc.is_symlink() and (original / source).is_file():
            out[rel] = pyc.read_bytes()
    return out


def save(path: Path, pycs: dict[str, bytes], key: str) -> None:
    """Keep a harvest on the host for the next stage of the run (a zip, stored, with `key`: what
    it was compiled from); written whole or not at all."""
    import os
    import zipfile

    part = path.with_name(path.name + ".part")
    with zipfile.ZipFile(part, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(_KEY, key)
        for rel, data in pycs.items():
            zf.writestr(rel, data)
    os.replace(part, path)


def load(path: Path, key: str) -> dict[str, bytes] | None:
    """A harvest `save` kept for `key`; None when there is none (or one of something else)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as zf:
            if zf.read(_KEY).decode() != key:
                return None
            return {name: zf.read(name) for name in zf.namelist() if name != _KEY}
    except (OSError, KeyError, zipfile.BadZipFile, UnicodeDecodeError):
        return None


_KEY = "featdel-harvest-key"


def overlay(tree: Path, pycs: dict[str, bytes], changed: set[str]) -> int:
    """Write into `tree` each pyc whose source is there and not in `changed` (paths the
    candidate edits or deletes); returns how many."""
    written = 0
    for rel, data in pycs.items():
        source = source_of(rel)
        if source in changed or (tree / source).is_symlink() or not (tree / source).is_file():
            continue
        path = tree / rel
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(data)
        written += 1
    return written

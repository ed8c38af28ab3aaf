"""What a sandbox shows beside the task, indexed once, and searched for copies of deleted code.

In: the roots a sandbox shows (`featdel.sandboxes.base.Visible`: the system directories, the
interpreter, the virtualenv, the report plugin), a repository's package names, and a deletion's
needles (featdel.code.leaks). Out: the first place a copy is found, or None.

Two searches, because a learner recovers deleted code in two ways:
- by name: any other copy of the repository's package (a `pkg/__init__.py` or `pkg.py` outside
  the tree under test, also inside wheels and zips) is a leak whatever its lines look like, since
  a vendored or reformatted copy still holds the answer; a package dir of that name that shares
  none of the package's module files but `__init__.py` is another package (`is_copy`);
- by line: a distinctive deleted line in any text file there.
These roots are the same for every candidate of a repository (and mostly of a machine), so each
is walked once per process into an index of names and line hashes; a candidate's audit is then
a few lookups. The work tree and writable dirs are not indexed: the start state changes per
candidate and is audited whole by `leaks.audit`. A copy kept only as bytecode or inside a
compiled library is not found (see docs/grading.md).
"""

from __future__ import annotations

import os
import threading
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from featdel.code.leaks import MIN_NEEDLE

MAX_TEXT_BYTES = 4 << 20  # larger files are data, not source
MIN_LINE_HITS = 2  # distinct deleted lines one file outside the tree must hold to be a copy
MAX_PLACES = 16  # places kept per module name
_ARCHIVES = (".whl", ".zip", ".egg", ".pyz")


@dataclass
class RootIndex:
    """Module names defined under a root and where, and which files hold each long line."""

    # import name -> where it is defined (the first MAX_PLACES): packages (a dir with __init__.py)
    # anywhere, with the names of their .py files, and single-file modules outside any package
    # (`urllib/parse.py` is not a copy of `parse`), with None
    modules: dict[str, list[tuple[str, frozenset[str] | None]]] = field(default_factory=dict)
    lines: dict[int, list[int]] = field(default_factory=dict)  # hash(line) -> file ids (capped)
    files: list[str] = field(default_factory=list)


_cache: dict[tuple[str, tuple[str, ...]], RootIndex] = {}
_lock = threading.Lock()


def index(host: Path, hidden: tuple[Path, ...] = ()) -> RootIndex:
    """The index of one root (cached for the process; roots outside the tree do not change)."""
    key = (str(host), tuple(sorted(map(str, hidden))))
    with _lock:
        if key not in _cache:
            _cache[key] = _build(Path(host), {str(h) for h in hidden})
        return _cache[key]


def forget() -> None:
    """Drop every index (a root changed: tests that plant copies call this)."""
    with _lock:
        _cache.clear()


def _build(host: Path, hidden: set[str]) -> RootIndex:
    idx = RootIndex()
    if host.is_file():
        walk = [(str(host.parent), [], [host.name])]
    else:
        walk = os.walk(host)  # never follows links: a link's target is shown only if it is a root
    for dirpath, dirs, files in walk:
        dirs[:] = [d for d in dirs if os.path.join(dirpath, d) not in hidden]
        in_package = "__init__.py" in files
        if in_package:
            _place(idx, os.path.basename(dirpath), dirpath, frozenset(n for n in files if n.endswith(".py")))
        for name in files:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            if name.endswith(".py") and not in_package:
                _place(idx, name[:-3], path, None)
            if name.endswith(_ARCHIVES):
                _index_archive(idx, path)
            _index_lines(idx, path)
    return idx


def _place(idx: RootIndex, name: str, where: str, files: frozenset[str] | None) -> None:
    places = idx.modules.setdefault(name, [])
    if len(places) < MAX_PLACES:
        places.append((where, files))


def _index_archive(idx: RootIndex, path: str) -> None:
    try:
        with zipfile.ZipFile(path) as zf:
            names = zf.namelist()
            packages = {m.rsplit("/", 1)[0] for m in names if m.endswith("/__init__.py")}
            inside: dict[str, set[str]] = {}
            for member in names:
                parent, _, leaf = member.rpartition("/")
                if parent in packages and leaf.endswith(".py"):
                    inside.setdefault(parent, set()).add(leaf)
            for member in names:
                parent, _, leaf = member.rpartition("/")
                if leaf == "__init__.py" and parent:
                    _place(idx, parent.rsplit("/", 1)[-1], f"{path}!{member}", frozenset(inside[parent]))
                elif leaf.endswith(".py") and parent not in packages:
                    _place(idx, leaf[:-3], f"{path}!{member}", None)
    except (zipfile.BadZipFile, OSError, ValueError):
        pass


def _index_lines(idx: RootIndex, path: str) -> None:
    try:
        if os.path.getsize(path) > MAX_TEXT_BYTES:
            return
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return
    if b"\0" in data[:8192]:
        return  # binary: shared libraries, bytecode, images
    file_id = len(idx.files)
    idx.files.append(path)
    lines = idx.lines
    # each distinct line once per file, the loop over them as short as it can be: this indexes
    # a million lines per process (the interpreter's tree is most of them)
    for key in {hash(line) for line in map(bytes.strip, data.splitlines()) if len(line) >= MIN_NEEDLE}:
        ids = lines.get(key)
        if ids is None:
            lines[key] = [file_id]
        elif len(ids) < 8:
            ids.append(file_id)


def package_names(package_dirs: list[str]) -> list[str]:
    """Import names of a repository's packages: "src/pkg" -> "pkg", "mod.py" -> "mod"."""
    return sorted({d.rstrip("/").rsplit("/", 1)[-1].removesuffix(".py") for d in package_dirs})


def package_files(tree: Path, package_dirs: list[str]) -> dict[str, frozenset[str]]:
    """Each package's import name and the names of its .py files in `tree` (empty for a
    single-file module: any place of that name is then a copy)."""
    out: dict[str, frozenset[str]] = {}
    for d in package_dirs:
        path = tree / d.rstrip("/")
        [name] = package_names([d])
        out[name] = out.get(name, frozenset()) | frozenset(p.name for p in path.glob("*.py") if path.is_dir())
    return out


def is_copy(found: frozenset[str] | None, own: frozenset[str]) -> bool:
    """Whether a place named like the repository's package (`found`: its .py file names, None
    for a single-file module) is a copy of it. A module file is; so is a package, unless the
    repository's package has two modules or more and it shares fewer than two of them: a Sphinx
    theme `pallets_sphinx_themes/themes/click` (__init__.py, domain.py) is no copy of click. A
    vendored copy keeps the file names; one flattened into a single file is found by its lines."""
    if found is None or "__init__.py" not in own:
        return True
    return len(found & own) >= min(2, len(own))


def audit(roots, needles: list[str], packages: Mapping[str, frozenset[str]] | list[str]) -> str | None:
    """The first copy of the repository's code in `roots` (Visible records other than the work
    tree and writable dirs): a package of the same name (`is_copy`; `packages` from
    `package_files`, or bare names: any place of the name), or a file holding two distinct
    deleted lines. One line is not enough out here: `return s.lower()` is in the standard
    library's pathlib, and a copy of a deletion that small is found by the package's name instead."""
    if not isinstance(packages, Mapping):
        packages = dict.fromkeys(packages, frozenset())
    for root in roots:
        if root.writable:
            continue  # the work tree (audited whole per candidate) and fresh report dirs
        idx = index(root.host, root.hidden)
        for name, own in sorted(packages.items()):
            for where, found in idx.modules.get(name, ()):
                if is_copy(found, own):
                    return f"{where}: another copy of the package `{name}` (shown at {root.inside})"
        hits: dict[int, set[str]] = {}
        for needle in needles:
            for file_id in idx.lines.get(hash(needle.encode()), ()):
                hits.setdefault(file_id, set()).add(needle)
        for file_id, found in sorted(hits.items()):
            if len(found) >= MIN_LINE_HITS:
                return f"{idx.files[file_id]}: {' | '.join(sorted(found)[:3])}"
    return None

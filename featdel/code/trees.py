"""Trees on disk: the original snapshot, a deletion applied to it, the scrubbed start state,
and the patches between them.

In: a `snapshot.tar.gz` (the original tree at base_commit, no VCS data) and a deletion's file
edits. Out: directories and unified diffs that `git apply` accepts. The start state is a fresh
git repository with exactly one commit (no history, reflog, tags or other branches) and none of
the caches or build outputs that could carry deleted code. Every git call here goes through
`featdel.code.hostgit`, so patches apply and diff byte for byte and no `.git` or `.gitattributes` a
tree holds (a learner's tree can hold anything) is ever read.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from featdel.code import hostgit
from featdel.code.git import commit_tree, git

JUNK_DIRS = {"__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".tox", ".nox", "build",
             "dist", ".hypothesis", ".eggs", ".pytype", ".pyre", ".git"}
JUNK_SUFFIXES = (".pyc", ".pyo", ".so", ".pyd", ".dylib")


def write_snapshot(repo: Path, commit: str, dest: Path) -> None:
    """The original tree at `commit`, as a tar.gz without VCS data (deterministic bytes)."""
    dest = dest.resolve()  # git runs in `repo`: a relative path would land there
    dest.parent.mkdir(parents=True, exist_ok=True)
    git("archive", "--format=tar.gz", "-o", str(dest), commit, cwd=repo)


def targz(tree: Path, rels: list[str]) -> bytes:
    """The files `rels` of `tree` as a tar.gz whose bytes depend only on their paths, contents,
    link targets and executable bits: sorted, mtime 0, owner root, and no time in the gzip header,
    so exporting the same run twice gives the same bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for rel in sorted(set(rels)):
            info = tar.gettarinfo(str(tree / rel), arcname=rel)
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            if info.isdir():
                info.mode = 0o755
            elif info.isreg():
                info.mode = 0o755 if info.mode & 0o100 else 0o644
            info.pax_headers = {}
            if info.isreg():
                with open(tree / rel, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                tar.addfile(info)
    return gzip.compress(buf.getvalue(), compresslevel=9, mtime=0)


def extract(snapshot: Path, dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(snapshot) as tf:
        tf.extractall(dest, filter="data")
    return dest


def apply_edits(tree: Path, files: dict[str, str | None]) -> None:
    for rel, text in files.items():
        path = tree / rel
        if text is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")


def scrub(tree: Path) -> list[str]:
    """Remove caches, bytecode, build outputs, coverage data and VCS data; return what went."""
    removed = []
    for path in sorted(tree.rglob("*"), key=lambda p: len(p.parts)):
        if not path.exists() and not path.is_symlink():
            continue
        name = path.name
        junk = (
            (path.is_dir() and (name in JUNK_DIRS or name.endswith(".egg-info")))
            or name.endswith(JUNK_SUFFIXES)
            or name.startswith(".coverage")
        )
        if junk:
            removed.append(path.relative_to(tree).as_posix())
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
    return removed


def start_state(snapshot: Path, deletion_patch: str, dest: Path, *, commit: bool = True) -> Path:
    """What a learner gets: snapshot + `git apply deletion_patch`, scrubbed, committed as the
    only commit of a fresh repository. Verification tests exactly this tree. `commit=False`:
    the files alone, no repository (what `tree_digest` hashes and packaging reads)."""
    extract(snapshot, dest)
    if deletion_patch:
        apply_patch(dest, deletion_patch)
    scrub(dest)
    if commit:
        commit_tree(dest, "start", pack=True)  # copied for every run of a candidate
    return dest


def variant_state(start: Path, original: Path, changed: set[str], files: dict[str, str | None]) -> list[str]:
    """Make `start`, a copy of the start state of a deletion that changed the files `changed`,
    hold what `start_state` of the edits `files` alone would hold: each file of `changed` not in
    `files` put back as the original has it (copied with its mode and time, so the original's
    bytecode of it stays valid; gone where the original has none), then `files` written. No git
    run: the start state's repository stays, the variant uncommitted over it, as a learner's
    patch is when graded. Returns the files put back."""
    restored = []
    for rel in sorted(set(changed) - set(files)):
        source, dest = original / rel, start / rel
        if source.is_symlink() or source.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            if dest.is_symlink() or dest.exists():
                dest.unlink()
            shutil.copy2(source, dest, follow_symlinks=False)
            restored.append(rel)
        else:
            dest.unlink(missing_ok=True)
            _prune(start, dest.parent)
    apply_edits(start, files)
    for rel, text in files.items():
        if text is None:
            _prune(start, (start / rel).parent)
    return restored


def _prune(tree: Path, parent: Path) -> None:
    """Remove `parent` and the folders above it that are left empty, up to `tree` (as `git apply`
    does for a file it removes)."""
    while parent != tree and parent.is_dir() and not parent.is_symlink() and not any(parent.iterdir()):
        parent.rmdir()
        parent = parent.parent


def start_state_of(snapshot: bytes, deletion_patch: str, dest: Path) -> Path:
    """`start_state` from a snapshot's bytes (an env row's `snapshot`)."""
    with tempfile.TemporaryDirectory(prefix="featdel-snapshot-") as tmp:
        path = Path(tmp) / "snapshot.tar.gz"
        path.write_bytes(snapshot)
        return start_state(path, deletion_patch, dest)


def diff(snapshot: Path, files: dict[str, str | None]) -> tuple[str, str]:
    """(deletion_patch, patch): original -> start state, and its reverse (the gold fix), from
    one extraction of each side."""
    with tempfile.TemporaryDirectory(prefix="featdel-diff-") as tmp:
        original = extract(snapshot, Path(tmp) / "a")
        edited = extract(snapshot, Path(tmp) / "b")
        apply_edits(edited, files)
        return diff_trees(original, edited), diff_trees(edited, original)


def diff_states(snapshot: Path, a: dict[str, str | None], b: dict[str, str | None]) -> str:
    """The unified diff from (snapshot + edits `a`) to (snapshot + edits `b`)."""
    with tempfile.TemporaryDirectory(prefix="featdel-diff-") as tmp:
        tree_a = extract(snapshot, Path(tmp) / "a")
        apply_edits(tree_a, a)
        tree_b = extract(snapshot, Path(tmp) / "b")
        apply_edits(tree_b, b)
        return diff_trees(tree_a, tree_b)


def diff_trees(a: Path, b: Path) -> str:
    """The unified diff from tree `a` to tree `b`, byte for byte: git runs on featdel's own
    repository and config, never on a `.git` or `.gitattributes` in either tree (featdel.code.hostgit)."""
    return hostgit.diff_trees(a, b)


def patched_files(patch: str) -> set[str]:
    """Every path a unified diff names on either side (`diff --git a/X b/Y`, `--- a/X`, `+++ b/Y`)."""
    import re

    out = set()
    for m in re.finditer(r"^(?:diff --git a/(\S+) b/(\S+)|--- a/(\S+)|\+\+\+ b/(\S+))", patch, re.M):
        out.update(g for g in m.groups() if g)
    return out


class PatchError(Exception):
    """`git apply` refused a patch; the message is git's last line."""


def apply_patch(tree: Path, patch: str) -> None:
    """Apply a unified diff with `git apply` to the files of `tree`, byte for byte: the tree's
    own `.git` and `.gitattributes`, if any, are never read (featdel.code.hostgit)."""
    with tempfile.NamedTemporaryFile("w", suffix=".patch", delete=False) as fh:
        fh.write(patch)
    try:
        done = hostgit.apply(tree, Path(fh.name), "--whitespace=nowarn")
    finally:
        Path(fh.name).unlink()
    if done.returncode != 0:
        lines = [ln for ln in done.stderr.splitlines() if ln.strip()] or ["git apply failed"]
        raise PatchError(lines[-1].replace(fh.name, "<patch>")[:300])


def copy_tree(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, symlinks=True)
    return dest


def files(tree: Path) -> dict[str, Path]:
    """Every file and symlink under `tree` but .git, by POSIX relative path; links not followed."""
    out = {}
    for dirpath, dirs, files in os.walk(tree):
        base = Path(dirpath)
        if base == tree:
            dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if (base / d).is_symlink()]:
            out[(base / name).relative_to(tree).as_posix()] = base / name
    return out


def changed_files(a: Path, b: Path) -> list[str]:
    """Paths added, removed or changed (content, or file <-> link) from tree `a` to tree `b`."""
    fa, fb = files(a), files(b)
    changed = set(fa) ^ set(fb)
    for rel in set(fa) & set(fb):
        pa, pb = fa[rel], fb[rel]
        if pa.is_symlink() or pb.is_symlink():
            if not (pa.is_symlink() and pb.is_symlink() and os.readlink(pa) == os.readlink(pb)):
                changed.add(rel)
        elif pa.read_bytes() != pb.read_bytes():
            changed.add(rel)
    return sorted(changed)


def digest(tree: Path, rel: str) -> str:
    """A content hash of one path (a link hashes as its target text; missing is "")."""
    path = tree / rel
    if path.is_symlink():
        return "link:" + os.readlink(path)
    if not path.is_file():
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree_digest(tree: Path) -> str:
    """One hash of every path and its content under `tree` (.git left out)."""
    h = hashlib.sha256()
    for rel in sorted(files(tree)):
        h.update(f"{rel}\0{digest(tree, rel)}\n".encode())
    return h.hexdigest()


def plain_path(tree: Path, rel: str) -> bool:
    """No component of `rel` under `tree` is a symlink (a missing path is plain)."""
    path = tree
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink():
            return False
    return True


def read_text(tree: Path, rel: str) -> str | None:
    """The file as text, or None when it is missing, a link or not UTF-8."""
    path = tree / rel
    if not path.is_file() or path.is_symlink():
        return None
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return None


def copy_path(src_tree: Path, dest_tree: Path, rel: str) -> None:
    """Make `rel` in `dest_tree` what it is in `src_tree` (a regular file, or absent)."""
    src, dest = src_tree / rel, dest_tree / rel
    if dest.is_dir() and not dest.is_symlink():
        shutil.rmtree(dest)
    else:
        dest.unlink(missing_ok=True)
    if src.is_file() and not src.is_symlink():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)

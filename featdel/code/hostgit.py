"""Git on the host over trees that a sandbox or a learner wrote, with none of the tree's own
configuration; and the sweep that takes `.git` and planted `.gitattributes` out of a tree after
a sandboxed run.

In: a tree and git arguments. Out: git's `CompletedProcess` (text). Why: git obeys a
repository's `.git/config` (filter drivers, core.fsmonitor, core.hooksPath, diff.external,
textconv, ...) and the tree's `.gitattributes`, and several of those name programs to run. Test
code in the sandbox writes the work tree, so a plain `git apply` there would run whatever that
code planted, as the featdel user, on the host; git's ownership check stops it only as root
(the tree belongs to the sandbox uid) and only where `safe.directory = *` is not set. So every
call made through `HostRepo`:
- uses a repository featdel made in a private temp dir (GIT_DIR), never one found in or under
  the tree; `apply` runs with no work tree (a bare repository: git then reads no
  `.gitattributes` from the tree at all), and when a work tree is needed (`add`), the
  repository's `info/attributes`, which outranks every `.gitattributes`, unsets every attribute
  that converts content, so the bytes on disk are the bytes hashed and patched;
- reads no system, global or XDG config or attributes, and none of the caller's GIT_*
  variables (GIT_CONFIG_PARAMETERS, GIT_EXTERNAL_DIFF, GIT_DIR, ...);
- pins what could still start a program: hooks, fsmonitor, transports; diffs add
  `--no-ext-diff --no-textconv`.
Patches therefore apply and diff byte for byte, whatever attributes the tree carries.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

# Highest-priority attributes: every one that changes bytes between disk and repository, or picks
# a diff/merge driver, back to unspecified (as if no .gitattributes existed).
NEUTRAL_ATTRIBUTES = "* !text !crlf !eol !ident !filter !working-tree-encoding !diff !merge !whitespace\n"
PINNED = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.attributesFile=/dev/null",
          "-c", "core.autocrlf=false", "-c", "protocol.allow=never")
DIFF_FLAGS = ("--binary", "--no-color", "--no-ext-diff", "--no-textconv")
MAX_KEPT_BYTES = 1 << 20


class HostRepo:
    """A bare repository of featdel's own in a private temp dir, and the isolated environment git
    runs in (a context manager; `close` removes it)."""

    def __init__(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="featdel-hostgit-"))
        self.git_dir, self.home = self.tmp / "repo.git", self.tmp / "home"
        self.home.mkdir()
        # The layout `git init --bare --template=` makes, written here: one process fewer per call.
        for sub in ("objects", "refs/heads", "refs/tags", "info"):
            (self.git_dir / sub).mkdir(parents=True)
        (self.git_dir / "HEAD").write_text("ref: refs/heads/main\n")
        (self.git_dir / "config").write_text("[core]\n\trepositoryformatversion = 0\n\tbare = true\n")
        (self.git_dir / "info" / "attributes").write_text(NEUTRAL_ATTRIBUTES)

    def __enter__(self) -> HostRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def env(self, git_dir: Path, work_tree: Path | None, index: Path | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null", GIT_ATTR_NOSYSTEM="1",
                   HOME=str(self.home), XDG_CONFIG_HOME=str(self.home), GIT_TERMINAL_PROMPT="0")
        env["GIT_DIR"] = str(git_dir)
        for name, path in (("GIT_WORK_TREE", work_tree), ("GIT_INDEX_FILE", index)):
            if path is not None:
                env[name] = str(path)
        return env

    def git(self, *args: str, git_dir: Path | None = None, work_tree: Path | None = None,
            index: Path | None = None, cwd: Path | None = None, env: dict[str, str] | None = None,
            check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """git `args` in the isolated environment, on this repository or `git_dir` (only ever one
        featdel made itself); `index` defaults to the repository's own. `check`: a failure
        raises `CalledProcessError`."""
        full_env = {**self.env(git_dir or self.git_dir, work_tree, index), **(env or {})}
        argv = ["git", *PINNED, *args]
        done = subprocess.run(argv, cwd=cwd or self.tmp, env=full_env, capture_output=True, timeout=timeout)
        # Decoded by hand: text=True would turn the \r\n of a CRLF file's diff lines into \n.
        out, err = done.stdout.decode("utf-8"), done.stderr.decode("utf-8", errors="replace")
        if check and done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, argv, output=out, stderr=err)
        return subprocess.CompletedProcess(argv, done.returncode, out, err)

    def write_tree(self, tree: Path, index: Path) -> str:
        """Hash every file of `tree` (a `.git` at its root left out, as git always does) into
        `index`; the tree object's id."""
        self.git("add", "-A", "-f", work_tree=tree, index=index, cwd=tree)
        return self.git("write-tree", index=index).stdout.strip()


def apply(tree: Path, patch_file: Path, *flags: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`git apply FLAGS PATCH` on the files of `tree`, with no repository or attributes of the
    tree's (see the module docstring); never raises for a patch that does not apply."""
    with HostRepo() as repo:
        return repo.git("apply", *flags, str(patch_file), cwd=tree, check=False, timeout=timeout)


def diff_trees(a: Path, b: Path, *, timeout: float = 300) -> str:
    """The unified diff (binary, renames found as plain `git diff` does) from tree `a` to tree
    `b`, both hashed byte for byte in a scratch repository. A `.git` at a tree's root is left
    out; one deeper down would make its folder a submodule, so callers pass trees without."""
    with HostRepo() as repo:
        base = repo.write_tree(a, repo.tmp / "index-a")
        repo.git("add", "-A", "-f", work_tree=b, index=repo.tmp / "index-b", cwd=b, timeout=timeout)
        return repo.git("diff", "--cached", *DIFF_FLAGS, base, work_tree=b, index=repo.tmp / "index-b", cwd=b,
                        timeout=timeout).stdout


class EditDiffer:
    """The patches of edits to one tree, that tree hashed once (a context manager; `close` removes
    its repository). Each `diff` writes only the edited files, into an empty folder, and hashes
    them over a copy of the original's index: four git runs and no copy of the tree, where
    `diff_trees` both ways would take eight and two trees. Same bytes out as `diff_trees`."""

    def __init__(self, original: Path) -> None:
        self.original = original
        self.repo = HostRepo()
        self.index = self.repo.tmp / "index-original"
        self.base = self.repo.write_tree(original, self.index)
        self._lock = threading.Lock()
        self._count = 0

    def __enter__(self) -> EditDiffer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.repo.close()

    def plain(self, files) -> bool:
        """Whether `diff` takes these edits: every path a plain file (or absent) in the original,
        under plain folders (a symlink among them: `diff_trees` of whole trees instead)."""
        for rel in files:
            path = self.original
            for part in Path(rel).parts:
                path = path / part
                if path.is_symlink():
                    return False
            if path.exists() and not path.is_file():
                return False
        return True

    def diff(self, files: dict[str, str | None]) -> tuple[str, str]:
        """(original -> edited, edited -> original) for `files` (path -> new text, None: removed)."""
        with self._lock:
            self._count += 1
            work, index = self.repo.tmp / f"work-{self._count}", self.repo.tmp / f"index-{self._count}"
        work.mkdir()
        try:
            shutil.copyfile(self.index, index)
            named = []
            for rel, text in files.items():
                source = self.original / rel
                if text is None:
                    if source.is_file():
                        named.append(rel)  # `add -A` of a path the folder lacks removes it
                    continue
                path = work / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                if source.is_file():
                    os.chmod(path, stat.S_IMODE(source.stat().st_mode))  # an executable stays one
                named.append(rel)
            literal = {"GIT_LITERAL_PATHSPECS": "1"}  # a path is a path, never a pattern
            if named:
                self.repo.git("add", "-A", "-f", "--", *sorted(named), work_tree=work, index=index, cwd=work, env=literal)
            edited = self.repo.git("write-tree", index=index).stdout.strip()
            return (self.repo.git("diff", *DIFF_FLAGS, self.base, edited).stdout,
                    self.repo.git("diff", *DIFF_FLAGS, edited, self.base).stdout)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            index.unlink(missing_ok=True)


def remove_git_entries(tree: Path) -> list[str]:
    """Remove every entry named `.git` under `tree` (file, link or directory, at any depth; links
    are removed, never followed); return their relative paths."""
    removed = []
    for dirpath, dirs, files in os.walk(tree):
        for name in [n for n in dirs + files if n == ".git"]:
            path = Path(dirpath, name)
            remove_entry(path)
            removed.append(path.relative_to(tree).as_posix())
        dirs[:] = [d for d in dirs if d != ".git"]
    return removed


def gitattributes(tree: Path) -> dict[str, tuple[str, bytes]]:
    """Every `.gitattributes` under `tree` that is a regular file (up to 1 MiB) or a link, links
    not followed: relative path -> ("file", content) or ("link", target)."""
    out = {}
    for dirpath, dirs, files in os.walk(tree):
        dirs[:] = [d for d in dirs if d != ".git"]
        if ".gitattributes" in files or ".gitattributes" in dirs:
            entry = _entry(Path(dirpath, ".gitattributes"))
            if entry is not None:
                out[Path(dirpath, ".gitattributes").relative_to(tree).as_posix()] = entry
    return out


def sweep(tree: Path, kept: dict[str, tuple[str, bytes]]) -> list[str]:
    """After a sandboxed run on `tree`: remove every `.git` entry, and every `.gitattributes`
    that `kept` (`gitattributes(tree)` from before the run) does not hold as it is now (a
    directory or FIFO by that name too); put a kept one the run changed or removed back as it
    was. Returns the relative paths removed or restored."""
    touched = remove_git_entries(tree)
    for dirpath, dirs, files in os.walk(tree):
        if ".gitattributes" in dirs + files:
            path = Path(dirpath, ".gitattributes")
            rel = path.relative_to(tree).as_posix()
            entry = _entry(path)
            if entry is None or kept.get(rel) != entry:
                remove_entry(path)
                touched.append(rel)
        dirs[:] = [d for d in dirs if d != ".gitattributes"]
    for rel, (kind, data) in kept.items():
        path = tree / rel
        if path.is_symlink() or path.exists() or not _plain_dir(tree, path.parent):
            continue  # unchanged, or its directory is gone or became a link: nothing to put back
        if kind == "link":
            os.symlink(os.fsdecode(data), path)
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        if rel not in touched:
            touched.append(rel)
    return touched


def _entry(path: Path) -> tuple[str, bytes] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        return ("link", os.fsencode(os.readlink(path)))
    if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_KEPT_BYTES:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None  # unreadable: not something to keep
    with os.fdopen(fd, "rb") as fh:
        return ("file", fh.read(MAX_KEPT_BYTES + 1))


def _plain_dir(tree: Path, directory: Path) -> bool:
    """`directory` is `tree` or a real directory below it with no link on the way."""
    path = tree
    for part in directory.relative_to(tree).parts:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return False
    return path.is_dir()


def remove_entry(path: Path) -> None:
    """Remove a file, link or directory tree, never following a link; what the sandbox made
    unreadable or unwritable is opened up first (a non-root host user could not otherwise)."""
    try:
        _rm(path)
    except PermissionError:
        parent = path.parent
        os.chmod(parent, stat.S_IMODE(os.lstat(parent).st_mode) | stat.S_IRWXU)
        if path.is_dir() and not path.is_symlink():
            _open_up(path)
        _rm(path)


def _rm(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def _open_up(top: Path) -> None:
    """chmod 0700 every directory under `top` (links are never followed: a run's processes are
    gone by now, so what is listed is what gets changed)."""
    stack = [str(top)]
    while stack:
        path = stack.pop()
        os.chmod(path, 0o700)
        with os.scandir(path) as entries:
            stack += [e.path for e in entries if e.is_dir(follow_symlinks=False)]

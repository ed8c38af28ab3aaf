"""Git for trees featdel itself pins and snapshots: one argv wrapper, and a tree turned into a
repository of exactly one commit.

In: git arguments, or a tree. Out: git's stdout, or the one commit's id; a `SourceError` with
git's last line on failure. Trees that a sandbox or a learner wrote go through
`featdel.code.hostgit` instead, which reads none of the tree's configuration.

Why not GitPython (so it is not a dependency): featdel runs git as argv lists with a fixed
environment, and on trees that may carry a hostile `.git/config` or `.gitattributes` with pinned
config and a repository of its own (`hostgit`). GitPython reads a repository's config itself and
shells out to the same `git` binary, so it would add a layer to harden, not remove one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from featdel.core.errors import SourceError

_FIXED_GIT_ENV = {
    "GIT_AUTHOR_NAME": "featdel",
    "GIT_AUTHOR_EMAIL": "featdel@localhost",
    "GIT_COMMITTER_NAME": "featdel",
    "GIT_COMMITTER_EMAIL": "featdel@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
}


def git(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    """Run git with an argument list; raise SourceError with git's last line on failure."""
    full_env = {**os.environ, **(env or {})}
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        raise SourceError(f"git {args[0]} timed out after {timeout:.0f}s") from exc
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise SourceError(f"git {args[0]} failed: {last}")
    return out.stdout.strip()


def commit_tree(path: Path, message: str, *, pack: bool = False) -> str:
    """Make `path` a git repository with exactly one commit of its files; return the commit id.
    A `.git` already there (an sdist can ship one, with hooks and config) is removed first, and
    git runs in featdel's isolated environment (`featdel.code.hostgit`): no hooks, no config but the
    new repository's own, none of the user's or the system's. The repository gets no template
    (no sample hooks, no description). `pack`: its objects go into one pack file, for a tree
    that is copied many times (a start state: 22 entries under .git for toolz, not 118, and a
    copy of the whole tree 1.6 ms, not 28)."""
    from featdel.code.hostgit import HostRepo, remove_entry

    git_dir = path / ".git"
    remove_entry(git_dir)
    steps = (["init", "-q", "-b", "main", "--template="], ["add", "-A", "-f"],
             ["commit", "-q", "--no-verify", "--no-gpg-sign", "-m", message],
             *([["repack", "-a", "-d", "-q"]] if pack else []), ["rev-parse", "HEAD"])
    with HostRepo() as host:
        for argv in steps:
            try:
                out = host.git(*argv, git_dir=git_dir, work_tree=None if argv[0] == "init" else path, cwd=path,
                               env=_FIXED_GIT_ENV, timeout=300)
            except subprocess.TimeoutExpired as exc:
                raise SourceError(f"git {argv[0]} timed out after 300s") from exc
            except subprocess.CalledProcessError as exc:
                last = (exc.stderr.strip().splitlines() or ["no output"])[-1]
                raise SourceError(f"git {argv[0]} failed: {last}") from None
    return out.stdout.strip()

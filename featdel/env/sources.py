"""Resolve a source spec to a pinned git tree.

In: a local directory (a git repository, bare or not), a git URL with an optional `@rev`,
`pypi:NAME==VERSION` or `npm:NAME@VERSION`. Out: a `PinnedSource` naming a git repository in the
cache and a commit. PyPI sdists and npm tarballs (`npm pack`, its `package/` folder) are unpacked
and committed with a fixed author and date, so the same archive always gets the same commit id. Every failure raises `SourceError` with a one-line fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from featdel.code.git import commit_tree, git
from featdel.core.errors import SourceError

_NPM = re.compile(r"^npm:(?P<name>(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*)@(?P<version>[0-9A-Za-z.+-]+)$")
_PYPI = re.compile(r"^pypi:(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[A-Za-z0-9.!+_-]+)$")


@dataclass(frozen=True, kw_only=True, slots=True)
class PinnedSource:
    spec: str  # what the user wrote
    name: str  # a filesystem-safe repo name, e.g. "cachetools-5.5.0"
    repo: Path  # a git repository holding `commit`
    commit: str


def cache_root() -> Path:
    return Path(os.environ.get("FEATDEL_CACHE", Path.home() / ".cache" / "featdel"))


def resolve(spec: str) -> PinnedSource:
    """Pin one source spec; see the module docstring for the accepted forms."""
    if spec.startswith("pypi:"):
        return _from_pypi(spec)
    if spec.startswith("npm:"):
        return _from_npm(spec)
    if "://" in spec or spec.startswith("git@"):
        return _from_git_url(spec)
    return _from_local(spec)


def public_source(spec: str) -> str:
    """What a source spec may say outside this machine: `pypi:` as is, a git URL without
    credentials, a local checkout as its remote's URL, and otherwise `local:NAME` (no path)."""
    if spec.startswith(("pypi:", "npm:")):
        return spec
    if spec.startswith("file:") or not ("://" in spec or spec.startswith("git@")):
        path = Path(re.sub(r"^file:(//)?", "", spec).rsplit("@", 1)[0] if spec.startswith("file:") else spec)
        try:
            url = git("remote", "get-url", "origin", cwd=path.expanduser(), timeout=30)
        except (SourceError, OSError):
            url = ""
        if url and ("://" in url or url.startswith("git@")) and not url.startswith("file:"):
            return _no_credentials(url)
        return f"local:{_safe(path.expanduser().resolve().name if path.name in ('', '.', '..') else path.name)}"
    return _no_credentials(spec)


def _no_credentials(url: str) -> str:
    return re.sub(r"^(\w[\w+.-]*://)[^/@]+@", r"\1", url)


def _from_local(spec: str) -> PinnedSource:
    path = Path(spec).expanduser()
    if not path.exists():
        raise SourceError(f"{spec}: no such directory (give a local path, a git URL or pypi:NAME==VERSION)")
    if not path.is_dir():
        raise SourceError(f"{spec}: not a directory")
    if _is_bare(path):  # a bare git directory (what `fetch` brings): its HEAD, read without a work tree
        try:
            commit = git("rev-parse", "--verify", "HEAD^{commit}", cwd=path)
        except SourceError:
            raise SourceError(f"{spec}: the bare repository has no HEAD commit") from None
        return PinnedSource(spec=spec, name=_safe(path.resolve().name.removesuffix(".git")), repo=path.resolve(),
                            commit=commit)
    try:
        top = Path(git("rev-parse", "--show-toplevel", cwd=path))
    except SourceError:
        raise SourceError(
            f"{spec}: not a git repository; pin it first with `git init && git add -A && git commit -m base`"
        ) from None
    try:
        commit = git("rev-parse", "HEAD", cwd=top)
    except SourceError:
        raise SourceError(f"{spec}: the repository has no commit yet; commit its files first") from None
    return PinnedSource(spec=spec, name=_safe(top.name), repo=top, commit=commit)


def _is_bare(path: Path) -> bool:
    try:
        return git("rev-parse", "--is-bare-repository", cwd=path) == "true"
    except SourceError:
        return False


def _from_git_url(spec: str) -> PinnedSource:
    url, rev = spec, None
    tail = spec.rsplit("@", 1)
    if len(tail) == 2 and "/" not in tail[1] and ":" not in tail[1]:
        url, rev = tail
    name = _safe(url.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git"))
    dest = cache_root() / "sources" / "git" / _safe(url.replace("://", "_").replace("/", "_"))
    if not (dest / ".git").exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        git("clone", "-q", url, str(dest), timeout=900)
    target = rev or "HEAD"
    try:
        commit = git("rev-parse", "--verify", f"{target}^{{commit}}", cwd=dest)
    except SourceError:
        git("fetch", "-q", "origin", target, cwd=dest, timeout=900)
        commit = git("rev-parse", "--verify", "FETCH_HEAD^{commit}", cwd=dest)
    return PinnedSource(spec=spec, name=f"{name}-{commit[:8]}", repo=dest, commit=commit)


def _from_pypi(spec: str) -> PinnedSource:
    match = _PYPI.match(spec)
    if not match:
        raise SourceError(f"{spec}: write PyPI sources as pypi:NAME==VERSION, e.g. pypi:cachetools==5.5.0")
    name, version = match["name"], match["version"]
    slug = _safe(f"{name}-{version}")
    dest = cache_root() / "sources" / "pypi" / slug
    if (dest / ".git").exists():
        return PinnedSource(spec=spec, name=slug, repo=dest, commit=git("rev-parse", "HEAD", cwd=dest))
    download = cache_root() / "sources" / "sdists" / slug
    shutil.rmtree(download, ignore_errors=True)
    download.mkdir(parents=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
            "-d", str(download), f"{name}=={version}"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise SourceError(f"{spec}: pip download timed out") from None
    archives = sorted(download.glob("*.tar.gz")) + sorted(download.glob("*.zip"))
    if out.returncode != 0 or not archives:
        last = (out.stderr.strip().splitlines() or ["no sdist"])[-1]
        raise SourceError(f"{spec}: no sdist could be downloaded ({last}); check the name and version on PyPI")
    return _committed(spec, slug, dest, archives[0], f"{name} {version} sdist")


def _from_npm(spec: str) -> PinnedSource:
    match = _NPM.match(spec)
    if not match:
        raise SourceError(f"{spec}: write npm sources as npm:NAME@VERSION, e.g. npm:tape@5.9.0 or npm:@scope/pkg@1.0.0")
    name, version = match["name"], match["version"]
    slug = _safe(f"{name.lstrip('@').replace('/', '-')}-{version}")
    dest = cache_root() / "sources" / "npm" / slug
    if (dest / ".git").exists():
        return PinnedSource(spec=spec, name=slug, repo=dest, commit=git("rev-parse", "HEAD", cwd=dest))
    download = cache_root() / "sources" / "tarballs" / slug
    shutil.rmtree(download, ignore_errors=True)
    download.mkdir(parents=True)
    argv = ["npm", "pack", "--silent", "--ignore-scripts", "--pack-destination", str(download), f"{name}@{version}"]
    env = {**os.environ, "npm_config_cache": str(cache_root() / "npm-cache"), "npm_config_update_notifier": "false"}
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=download, env=env)
    except subprocess.TimeoutExpired:
        raise SourceError(f"{spec}: npm pack timed out") from None
    except OSError as exc:
        raise SourceError(f"{spec}: npm does not run here ({exc}); install Node.js and npm") from None
    archives = sorted(download.glob("*.tgz"))
    if out.returncode != 0 or not archives:
        last = (out.stderr.strip().splitlines() or ["no tarball"])[-1]
        raise SourceError(f"{spec}: no tarball could be fetched ({last}); check the name and version on npm")
    return _committed(spec, slug, dest, archives[0], f"{name} {version} npm tarball")  # one folder, `package/`


def _committed(spec: str, slug: str, dest: Path, archive: Path, message: str) -> PinnedSource:
    """The archive unpacked (its single top-level folder dropped) and committed reproducibly at
    `dest`, which appears only once whole."""
    staging = dest.with_name(dest.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    _unpack(archive, staging)
    commit_tree(staging, message)
    shutil.rmtree(dest, ignore_errors=True)
    staging.rename(dest)
    return PinnedSource(spec=spec, name=slug, repo=dest, commit=git("rev-parse", "HEAD", cwd=dest))


def _unpack(archive: Path, dest: Path) -> None:
    """Unpack an sdist into `dest`, dropping its single top-level folder; refuse unsafe paths."""
    tmp = dest.with_name(dest.name + ".unpack")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as zf:
            for member in zf.namelist():
                if member.startswith("/") or ".." in Path(member).parts:
                    raise SourceError(f"{archive.name}: unsafe path {member} in the sdist")
            zf.extractall(tmp)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(tmp, filter="data")
    entries = list(tmp.iterdir())
    root = entries[0] if len(entries) == 1 and entries[0].is_dir() else tmp
    shutil.move(str(root), str(dest))
    shutil.rmtree(tmp, ignore_errors=True)


def checkout(source: PinnedSource, dest: Path) -> None:
    """Write the tree of `source.commit` into `dest` without any VCS data."""
    dest.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", "--format=tar", source.commit], cwd=source.repo, capture_output=True, timeout=300
    )
    if archive.returncode != 0:
        raise SourceError(f"{source.spec}: git archive failed: {archive.stderr.decode().strip()[-200:]}")
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True, timeout=300)


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "repo"

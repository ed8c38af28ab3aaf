"""The install tools leave an environment once it is installed: a test run sees what the tests need.

In: a built venv and the repository's tree. Out: the venv without pip, setuptools and wheel,
unless the repository's own code or tests import one of them, which then stays (and so stays
in the lock). setuptools vendors copies of other libraries (more_itertools,
packaging, jaraco.*, ordered_set and others) that the leak audit rightly counts as copies of
those libraries' deleted code; nothing the tests run needs them.

Installs go through uv (`through_uv`), or the host's pip (`through_host_pip`) where uv is
missing, refuses a step or FEATDEL_INSTALLER=pip says so: either way no installer sits in the venv.

The lock is what the venv holds after this (`featdel.env.envs.lock`), so an environment rebuilt
from the shards strips the tools the lock does not name (`strip(venv, keep=locked(...))`).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

# distribution -> the top-level modules it installs that other code may import
TOOLS = {"setuptools": ("setuptools", "pkg_resources", "_distutils_hack"), "wheel": ("wheel",), "pip": ("pip",)}
_IMPORT = re.compile(rb"^[ \t]*(?:import|from)[ \t]+(" + b"|".join(
    re.escape(m.encode()) for mods in TOOLS.values() for m in mods) + rb")\b", re.M)


INSTALL_SCRIPTS = {"setup.py"}  # they import setuptools to install the repo, never at test time


def needed(roots: list[Path]) -> set[str]:
    """The tools some Python file under `roots` imports (an `import`/`from` line naming one of
    their modules, at any indentation: a guarded import counts), install scripts left out."""
    out = set()
    for root in roots:
        for path in root.rglob("*.py"):
            if path.name in INSTALL_SCRIPTS or not path.is_file():
                continue
            try:
                data = path.read_bytes()
            except OSError:
                continue
            for m in _IMPORT.finditer(data):
                module = m.group(1).decode()
                out |= {tool for tool, mods in TOOLS.items() if module in mods}
    return out


def site_packages(venv: Path) -> list[Path]:
    return sorted(venv.glob("lib/python*/site-packages"))


def keep_for(tree: Path) -> set[str]:
    """The tools the repository's own files (its code, tests, conftests) import. A dependency's
    optional use of one (mypyc's `setuptools` build helpers) does not keep it: tests that need
    it fail at baseline and are left out, as any other test the environment cannot run."""
    return needed([tree])


def strip(venv: Path, keep: set[str], log: Path | None = None) -> list[str]:
    """Uninstall the tools present and not in `keep`; return them."""
    present = {t for t in TOOLS for sp in site_packages(venv) if next(sp.glob(f"{t}-*.dist-info"), None)}
    gone = sorted(present - keep, key=lambda t: t == "pip")
    if gone:  # uv or the host's pip: the venv's own may be among what goes, or absent
        uv = _uv()
        argv = ([uv, "pip", "uninstall", "--no-config", "--python", str(venv / "bin" / "python"), *gone] if uv else
                [*host_pip(venv), "uninstall", "-y", "-q", *gone])
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300,
                              env={**os.environ, **uv_environ()} if uv else None)
        if log is not None:
            with log.open("a") as fh:
                fh.write(f"$ {' '.join(argv)}\n{done.stdout}{done.stderr}")
        if done.returncode != 0:
            from featdel.core.errors import EnvBuildError

            raise EnvBuildError(f"could not remove the install tools {', '.join(gone)} from {venv}: "
                                f"{done.stderr.strip()[-200:]}")
    return gone


def host_pip(venv: Path) -> list[str]:
    """This interpreter's pip, acting on `venv` (`pip --python`): a venv made `--without-pip`
    never holds the tools at all, which saves the bundled pip's install (ensurepip: seconds of
    CPU per environment) and its removal afterwards."""
    return [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "--disable-pip-version-check"]


def through_host_pip(argv: list[str], venv: Path) -> list[str]:
    """A recipe's install command (`python -m pip ...` or `pip ...`) run by `host_pip`; any other
    command as it is."""
    pip_args = _pip_args(argv)
    return [*host_pip(venv), *pip_args] if pip_args is not None else list(argv)


def through_uv(argv: list[str], venv: Path, *, compile_all: bool = True) -> list[str] | None:
    """A recipe's `pip install ...` run by uv into `venv`, or None: not a pip install, or no uv
    here, or FEATDEL_INSTALLER=pip. uv installs the same distributions as pip several times
    faster (a shared cache, parallel downloads, no bytecode pass per file); `--no-config` keeps
    the repository's own `[tool.uv]` settings out, as pip reads no settings from the repository.
    `compile_all`: then byte-compile the whole venv (uv compiles all of site-packages, not only
    what it installed), as pip does, so that no test run compiles it again: the last step of a
    build asks for it, and the others do not compile what it compiles anyway."""
    pip_args = _pip_args(argv)
    uv = _uv()
    if pip_args is None or pip_args[:1] != ["install"] or uv is None:
        return None
    return [uv, "pip", "install", "--no-config", *(["--compile-bytecode"] if compile_all else []),
            "--python", str(venv / "bin" / "python"), *pip_args[1:]]


def _uv() -> str | None:
    """The uv binary of featdel's own environment (the `uv` package), or None (or
    FEATDEL_INSTALLER=pip: pip does every install)."""
    if os.environ.get("FEATDEL_INSTALLER", "uv") != "uv":
        return None
    try:
        from uv import find_uv_bin

        return find_uv_bin()
    except (ImportError, FileNotFoundError):
        return None


def uv_environ() -> dict[str, str]:
    """uv's cache inside featdel's (`cache_root()/uv`, cold when FEATDEL_CACHE is) unless the
    caller chose one; never a Python download."""
    from featdel.env.sources import cache_root

    return {"UV_CACHE_DIR": os.environ.get("UV_CACHE_DIR") or str(cache_root() / "uv"),
            "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}


def _pip_args(argv: list[str]) -> list[str] | None:
    if argv[:3] == ["python", "-m", "pip"]:
        return list(argv[3:])
    if argv[:1] == ["pip"]:
        return list(argv[1:])
    return None


def locked(lock: list[str]) -> set[str]:
    """The tools a lock names (an environment built from it keeps exactly those)."""
    names = {re.split(r"[=<>!~ @\[;]", line, maxsplit=1)[0].strip().lower().replace("_", "-") for line in lock}
    return {t for t in TOOLS if t in names}


def tree_import_roots(env) -> dict[str, list[str] | None]:
    """Where the interpreter of `env` finds modules in the checkout before any code runs: the
    venv's .pth path lines under `env.src` (a folder relative to the checkout: None, every name
    in it) and the editable finders' mappings (`__editable___*_finder.py`: the folder holding each
    mapped top-level name, with those names). A warm pytest must not have loaded any of these."""
    import ast

    src = str(env.src)
    roots: dict[str, list[str] | None] = {}
    for site in env.venv.glob("lib/python*/site-packages"):
        for pth in site.glob("*.pth"):
            for line in pth.read_text(errors="replace").splitlines():
                line = line.strip()
                if line.startswith(src) and not line.startswith("import"):
                    roots[os.path.relpath(line, src)] = None
        for finder in site.glob("__editable___*finder.py"):
            text = finder.read_text(errors="replace")
            for raw in re.findall(r"^MAPPING\s*(?::[^=]*)?=\s*(\{.*?\})\s*$", text, re.MULTILINE):
                try:
                    mapping = ast.literal_eval(raw)
                except (ValueError, SyntaxError):
                    continue
                for name, path in mapping.items():
                    if str(path).startswith(src):
                        folder = os.path.relpath(os.path.dirname(path), src)
                        if roots.get(folder, []) is not None:
                            roots.setdefault(folder, []).append(name)
    return {("" if k == "." else k): v for k, v in roots.items()}

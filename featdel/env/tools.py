"""The install tools leave an environment once it is installed: a test run sees what the tests need.

In: a built venv and the repository's tree. Out: the venv without pip, setuptools and wheel,
unless the repository's own code or tests import one of them, which then stays (and so stays
in the lock). setuptools vendors copies of other libraries (more_itertools,
packaging, jaraco.*, ordered_set and others) that the leak audit rightly counts as copies of
those libraries' deleted code; nothing the tests run needs them.

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
    if gone:  # the host's pip: the venv's own may be among what goes, or absent
        done = subprocess.run([*host_pip(venv), "uninstall", "-y", "-q", *gone], capture_output=True, text=True,
                              timeout=300)
        if log is not None:
            with log.open("a") as fh:
                fh.write(f"$ pip uninstall -y {' '.join(gone)}\n{done.stdout}{done.stderr}")
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
    if argv[:3] == ["python", "-m", "pip"]:
        return [*host_pip(venv), *argv[3:]]
    if argv[:1] == ["pip"]:
        return [*host_pip(venv), *argv[1:]]
    return list(argv)


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

"""Work out how to install a repository and run its tests, from what the repository declares.

In: a checked-out tree and optional manifest overrides. Out: a `Recipe` (Python version,
install commands, test command, import roots). Test dependencies come from pyproject extras and
dependency groups, setup.cfg extras, `requirements*test*.txt`/`requirements-dev*.txt`, and
tox.ini `deps`, plus pytest and coverage, which featdel itself needs. The repo is installed after
the requirement files and featdel's needs last, so neither a requirement nor a repo's pin can
replace the editable install or the coverage featdel measures with. The recipe asks; what the
install produced (`Recipe.lock`) is filled in by `featdel.env.envs` after the build.
"""

from __future__ import annotations

import configparser
import platform
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from featdel.code.spans import is_test_path
from featdel.core.records import Recipe

_TEST_EXTRA = re.compile(r"^(test|tests|testing|dev|develop|development)$", re.I)
_NOT_PACKAGES = {"tests", "test", "testing", "docs", "doc", "examples", "example", "benchmarks",
                 "bench", "scripts", "tools", "build", "dist", "setup", "conftest", "noxfile",
                 "tasks", "fabfile", "ci", "versioneer"}
BASE_TEST_CMD = ["python", "-m", "pytest", "-p", "no:cacheprovider", "-q"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Overrides:
    """Per-repo manifest settings; empty fields mean "work it out"."""

    extras: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)  # extra pip requirements
    test_args: list[str] = field(default_factory=list)  # appended to the pytest command
    package_dirs: list[str] = field(default_factory=list)
    timeout_s: float | None = None


# Tried in order when a suite crashes before reporting: old conftests often use hooks that
# pytest 8 removed (e.g. `pytest_ignore_collect(path)`).
PYTEST_FALLBACKS = ("pytest", "pytest<8")


def detect(tree: Path, overrides: Overrides = Overrides(), *, pytest_req: str = "pytest",
           all_extras: bool = False) -> Recipe:
    """`all_extras`: install every extra the repo declares, not only its test extras (mining
    retries with them when a test module fails to import a module)."""
    extras = sorted(set(overrides.extras) | (declared_extras(tree) if all_extras else _declared_test_extras(tree)))
    target = f".[{','.join(extras)}]" if extras else "."
    install = []
    found = [*tree.glob("requirements*.txt"), *tree.glob("requirements/*.txt"), *tree.glob("test*-requirements.txt"),
             *tree.glob("test*/requirements*.txt")]
    for req in sorted(set(found)):
        name = req.relative_to(tree).as_posix().lower()
        if ("test" in name or "dev" in name) and _requirements_are_plain(req):
            install.append(["python", "-m", "pip", "install", "-q", "-r", req.relative_to(tree).as_posix()])
    # The repo goes in after the requirement files: a dev requirement that depends on the
    # library itself (click 8.1.7's pip-tools) would otherwise replace the editable install with
    # a copy from PyPI, and the suite would test that copy (0% coverage of the tree).
    install.append(["python", "-m", "pip", "install", "-q", "-e", target])
    plain = sorted(set(overrides.packages) | _tox_deps(tree) | _dependency_group(tree))
    # featdel's own needs win over a repo's pins: coverage 7 for per-test contexts (pyparsing
    # 3.1.4 pins coverage 4.4.2, whose data file is not SQLite).
    always = list(dict.fromkeys([pytest_req, "coverage>=7", *(p for p in plain if p not in ("pytest", "coverage"))]))
    install.append(["python", "-m", "pip", "install", "-q", *always])
    return Recipe(
        python=platform.python_version(),
        install=install,
        test_cmd=[*BASE_TEST_CMD, *overrides.test_args],
        package_dirs=overrides.package_dirs or import_roots(tree),
    )


def import_roots(tree: Path) -> list[str]:
    """Top-level packages and modules of the library (not its tests, docs or build scripts)."""
    base = tree / "src" if (tree / "src").is_dir() else tree
    roots = []
    for entry in sorted(base.iterdir()):
        rel = entry.relative_to(tree).as_posix()
        stem = entry.name.removesuffix(".py")
        if stem in _NOT_PACKAGES or stem.startswith((".", "_")) or is_test_path(rel):
            continue
        if entry.is_dir() and (entry / "__init__.py").exists():
            roots.append(rel)
        elif entry.is_file() and entry.suffix == ".py":
            roots.append(rel)
    return roots


def _declared_test_extras(tree: Path) -> set[str]:
    return {k for k in declared_extras(tree) if _TEST_EXTRA.match(k)}


def declared_extras(tree: Path) -> set[str]:
    """Every extra the repo declares (pyproject, setup.cfg, or a literal dict in setup.py)."""
    found: set[str] = set()
    pyproject = tree / "pyproject.toml"
    if pyproject.exists():
        try:
            data = tomllib.loads(pyproject.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError):
            data = {}
        found |= set(data.get("project", {}).get("optional-dependencies", {}))
    setup_cfg = tree / "setup.cfg"
    if setup_cfg.exists():
        cfg = configparser.ConfigParser(interpolation=None)
        try:
            cfg.read(setup_cfg)
        except configparser.Error:
            return found
        if cfg.has_section("options.extras_require"):
            found |= set(cfg["options.extras_require"])
    setup_py = tree / "setup.py"
    if setup_py.exists():
        text = setup_py.read_text(errors="replace")
        block = re.search(r"extras_require\s*=\s*\{(.*?)\}", text, re.S)
        if block:
            found |= set(re.findall(r"['\"]([\w.-]+)['\"]\s*:", block[1]))
    return found


def _dependency_group(tree: Path) -> set[str]:
    """PEP 735 `[dependency-groups]` test/dev groups: plain requirement strings only."""
    pyproject = tree / "pyproject.toml"
    if not pyproject.exists():
        return set()
    try:
        groups = tomllib.loads(pyproject.read_text()).get("dependency-groups", {})
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return set()
    return {r for k, v in groups.items() if _TEST_EXTRA.match(k) for r in v if isinstance(r, str)}


def _tox_deps(tree: Path) -> set[str]:
    tox = tree / "tox.ini"
    if not tox.exists():
        return set()
    cfg = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        cfg.read(tox)
    except configparser.Error:
        return set()
    if not cfg.has_option("testenv", "deps"):
        return set()
    deps = set()
    for line in cfg.get("testenv", "deps").splitlines():
        line = line.split("#", 1)[0].strip()
        # Skip tox substitutions, factor conditions, options and local paths.
        if line and not re.search(r"[{}:]|^-|^\.|/", line):
            deps.add(line)
    return deps


def _requirements_are_plain(req: Path) -> bool:
    """A requirements file we can pass to pip as is: no editable or relative installs."""
    for line in req.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith(("-e", ".", "-c", "git+")) or "://" in line:
            return False
    return True

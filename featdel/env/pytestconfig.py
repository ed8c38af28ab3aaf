"""Which configuration file pytest would read for a tree, found on the host before the run so
the run can be told it explicitly (`-c FILE --rootdir DIR`) and never discovers another.

In: a tree on the host and the test paths of the run. Out: the config file and rootdir relative
to the tree (or None: no file, rootdir is the tree). The search is pytest 9's: from the common
ancestor of the test paths up to the tree's root, in each folder the first of `pytest.toml`,
`.pytest.toml`, `pytest.ini`, `.pytest.ini` (always), `pyproject.toml` with a `[tool.pytest]`
or `[tool.pytest.ini_options]` table, `tox.ini` with `[pytest]`, `setup.cfg` with
`[tool:pytest]`. Every one of these names is protected by the grader, so in a graded tree what
this finds is the task's own file.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

CONFIG_NAMES = ("pytest.toml", ".pytest.toml", "pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg")
_SECTION = {
    "pyproject.toml": re.compile(r"^\s*\[\s*tool\s*\.\s*pytest(\s*\.\s*ini_options)?\s*\]", re.MULTILINE),
    "tox.ini": re.compile(r"^\s*\[\s*pytest\s*\]", re.MULTILINE),
    "setup.cfg": re.compile(r"^\s*\[\s*tool:pytest\s*\]", re.MULTILINE),
}


def find_config(tree: Path, tests: list[str] | None) -> str | None:
    """The config file pytest would read for `tests` (node ids; None: the whole suite), relative
    to `tree`, or None."""
    start = _common_folder([t.split("::", 1)[0] for t in tests or []])
    folder = PurePosixPath(start)
    while True:
        for name in CONFIG_NAMES:
            path = tree / folder / name
            if path.is_file() and not path.is_symlink() and _holds_pytest(path, name):
                return (folder / name).as_posix()
        if folder == PurePosixPath("."):
            return None
        folder = folder.parent


def _holds_pytest(path: Path, name: str) -> bool:
    pattern = _SECTION.get(name)
    if pattern is None:
        return True  # pytest's own files count even when empty
    try:
        return bool(pattern.search(path.read_text(errors="replace")))
    except OSError:
        return False


def _common_folder(paths: list[str]) -> str:
    folders = [str(PurePosixPath(p).parent) for p in paths if p and not p.startswith(("/", "-"))]
    return (os.path.commonpath(folders) or ".") if folders else "."

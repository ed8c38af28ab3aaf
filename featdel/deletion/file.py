"""The `file` strategy: remove a whole module.

In: the original tree and a candidate of kind "file" (its `path` is the module). Out: that path
mapped to None. Chosen rule: a module that any other source module (the package's `__init__.py`
included) imports at import time is refused outright, even inside `try:` or `if`, rather than
editing the importer: dropping `from . import mod` would silently change the package's public
surface, and a `try/except ImportError` fallback would turn the task into "notice the fallback".
Imports inside functions are allowed: those code paths fail, which is the point. Test files may
import it (those are the tests that should fail). `__init__.py`, `__main__.py`, `conftest.py`,
`setup.py` and test files are never removed. The caller's check then runs on the removal.

JavaScript and TypeScript follow the same rule through their `edits.importers`: a module any
other source module loads at load time (a static `import`, an `export ... from`, a `require`
outside any function) is refused; an `index` module (a folder's entry point) never goes, nor
the files of `package.json`'s `main`.
"""

from __future__ import annotations

import random
from pathlib import Path

import json
import posixpath

from featdel.code.imports import loads, module_name
from featdel.code.spans import is_test_path
from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import (
    Check,
    KindStrategy,
    NotApplicable,
    RolledBack,
    Tree,
    language_of,
    make_deletion,
    passes,
)
from featdel.deletion.callgraph import file_imports

NEVER = frozenset({"__init__.py", "__main__.py", "conftest.py", "setup.py"})


class FileStrategy(KindStrategy):
    name = "file"
    kinds = frozenset({"file"})
    languages = frozenset({"python", "javascript"})

    def apply(
        self,
        root: Path,
        candidate: Candidate,
        *,
        check: Check,
        keep_docstrings: bool,
        rng: random.Random,
    ) -> Deletion:
        rel = candidate.path
        if candidate.kind not in self.kinds:
            raise NotApplicable(f"kind {candidate.kind!r} is not 'file'")
        lang = language_of(rel)
        if lang.edits is not None:
            return self._apply_edits(root, candidate, check, lang)
        if is_test_path(rel) or rel.rsplit("/", 1)[-1] in NEVER:
            raise NotApplicable(f"{rel} is never removed whole")
        tree = Tree.open(root)
        text = tree.read(rel).decode("utf-8")
        paths = set(tree.paths())
        module = module_name(rel, paths)
        if module is None:
            raise NotApplicable(f"{rel} is not an importable module")
        for other in tree.source_paths():
            if other == rel or module.rpartition(".")[2] not in tree.read(other).decode("utf-8"):
                continue
            for ref in file_imports(tree, other):
                if ref.top_level and loads(ref, module):
                    line = ref.node.start_point[0] + 1
                    raise NotApplicable(f"{other}:{line} imports {module} at import time")
        edits: dict[str, str | None] = {rel: None}
        ok, reason = passes(check, edits)
        if not ok:
            raise RolledBack(f"removing {rel} fails the check: {reason}")
        deleted = [f"{rel}::{s.qualname}" for s in tree.symbols(rel)] or [f"{rel}::"]
        return make_deletion(
            candidate,
            self.name,
            keep_docstrings=False,
            deleted=deleted,
            files=edits,
            removed=[text],
        )

    def _apply_edits(self, root: Path, candidate: Candidate, check: Check, lang) -> Deletion:
        """The same rule for a language with its own edits (see the module docstring)."""
        rel = candidate.path
        if lang.name not in self.languages or lang.is_test_path(rel):
            raise NotApplicable(f"{rel} is never removed whole")
        tree = Tree.open(root)
        if rel.rsplit("/", 1)[-1].split(".", 1)[0] == "index" or rel in _entry_points(Path(root)):
            raise NotApplicable(f"{rel} is an entry point of the package, never removed whole")
        text = tree.read(rel).decode("utf-8")
        loaders = lang.edits.importers(tree, rel)
        if loaders:
            raise NotApplicable(f"{loaders[0]} loads {rel} at load time")
        edits: dict[str, str | None] = {rel: None}
        ok, reason = passes(check, edits)
        if not ok:
            raise RolledBack(f"removing {rel} fails the check: {reason}")
        deleted = [f"{rel}::{s.qualname}" for s in tree.symbols(rel)] or [f"{rel}::"]
        return make_deletion(candidate, self.name, keep_docstrings=False, deleted=deleted, files=edits, removed=[text])


def _entry_points(root: Path) -> set[str]:
    """The files `package.json` names as the package's entry points (`main`, `module`, `browser`)."""
    try:
        manifest = json.loads((root / "package.json").read_text())
    except (OSError, ValueError):
        return set()
    found = set()
    for key in ("main", "module", "browser", "types"):
        value = manifest.get(key) if isinstance(manifest, dict) else None
        if isinstance(value, str):
            found.add(posixpath.normpath(value))
    return found

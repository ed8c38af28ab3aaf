"""The `file` strategy: remove a whole module.

In: the original tree and a candidate of kind "file" (its `path` is the module). Out: that path
mapped to None. Chosen rule: a module that any other source module (the package's `__init__.py`
included) imports at import time is refused outright, even inside `try:` or `if`, rather than
editing the importer: dropping `from . import mod` would silently change the package's public
surface, and a `try/except ImportError` fallback would turn the task into "notice the fallback".
Imports inside functions are allowed: those code paths fail, which is the point. Test files may
import it (those are the tests that should fail). `__init__.py`, `__main__.py`, `conftest.py`,
`setup.py` and test files are never removed. The caller's check then runs on the removal.
"""

from __future__ import annotations

import random
from pathlib import Path

from featdel.code.imports import loads, module_name
from featdel.code.spans import is_test_path
from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import Check, KindStrategy, NotApplicable, RolledBack, Tree, make_deletion, passes
from featdel.deletion.callgraph import file_imports

NEVER = frozenset({"__init__.py", "__main__.py", "conftest.py", "setup.py"})


class FileStrategy(KindStrategy):
    name = "file"
    kinds = frozenset({"file"})

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

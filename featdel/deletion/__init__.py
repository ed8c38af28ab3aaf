"""Deletion strategies: one registry, seeded and deterministic.

`delete(root, candidate, "body", check=..., keep_docstrings=True, seed=0)` returns a `Deletion`
or raises `NotApplicable` (its subclass `RolledBack` when the caller's check refused every step).
`STRATEGIES` maps names to `Strategy` objects; `choose` picks (candidate, strategy) pairs from a
seeded rng; `import_check` is a real check for tests and trusted local runs.
"""

from featdel.deletion.base import Check, Edits, NotApplicable, RolledBack, Strategy, UnknownStrategy
from featdel.env.importcheck import import_check
from featdel.deletion.registry import STRATEGIES, choose, delete, strategy

__all__ = [
    "STRATEGIES",
    "Check",
    "Edits",
    "NotApplicable",
    "RolledBack",
    "Strategy",
    "UnknownStrategy",
    "choose",
    "delete",
    "import_check",
    "strategy",
]

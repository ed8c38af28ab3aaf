"""Deletion strategies: one registry, seeded and deterministic.

`delete(root, candidate, "body", check=..., keep_docstrings=True, seed=0)` returns a `Deletion`
or raises `NotApplicable` (its subclass `RolledBack` when the caller's check refused every step).
`STRATEGIES` maps names to `Strategy` objects; `choose` picks (candidate, strategy) pairs from a
seeded rng. The callers bring the check: the pipeline's sandboxed build check
(`featdel.pipeline.context`), or the unsandboxed `tests/importcheck.py` in the tests.
"""

from featdel.deletion.base import Check, Edits, NotApplicable, RolledBack, Strategy, UnknownStrategy
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
    "strategy",
]

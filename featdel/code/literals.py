"""A literal changed a little: the expected value of a perturbed canary (featdel.grading.canaries
for Python, featdel.lang.javascript.canaries for JavaScript), and a value of any literal type
changed a little (`changed`: what a held-out variant's perturbed copy expects).

In: a str or int and a seed drawn per run. Out: a value of the same type that differs from it
in one place and carries no mark of which: one character of a string replaced by another of its
class (digit, lower, upper, punctuation), or an int plus 1..97. A result that compares equal to
every value of its type passes a test against it; a right result never does.
"""

from __future__ import annotations


def perturbed(value: str | int, seed: int) -> str | int:
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"only str and int literals are perturbed, not {type(value).__name__}")
    if isinstance(value, int):
        return value + 1 + seed % 97
    if not value:
        return "abcdefghijklmnopqrstuvwxyz"[seed % 26]
    at = seed % len(value)
    old = value[at]
    pool = ("0123456789" if old.isdigit() else "abcdefghijklmnopqrstuvwxyz" if old.islower()
            else "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if old.isupper() else " .,;:-_!?")
    pool = pool.replace(old, "") or "x"
    return value[:at] + pool[(seed // 7) % len(pool)] + value[at + 1:]


def changed(value: object, seed: int) -> object | None:
    """A str, int, float, bool, None, or a list, tuple or dict of them, changed in one place
    (its first element, its first key's value), or None where no change is sure to compare
    unequal (a float too large to move, an empty set)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (str, int)):
        return perturbed(value, seed)
    if isinstance(value, float):
        moved = value + 1 + seed % 97
        return moved if moved != value else None
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        head = changed(value[0], seed) if value else 0
        return None if head is None else type(value)([head, *value[1:]])
    if isinstance(value, dict):
        if not value:
            return {"k": 0}
        first = next(iter(value))
        head = changed(value[first], seed)
        return None if head is None else {**value, first: head}
    return None

"""A literal changed a little: the expected value of a perturbed canary (featdel.grading.canaries
for Python, featdel.lang.javascript.canaries for JavaScript).

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

"""A literal changed a little: the expected value of a perturbed canary (featdel.grading.canaries
for Python, featdel.lang.javascript.canaries for JavaScript); and the decoys of a held-out
variant's answer (`decoys`), which must not give away which of them is the answer.

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


# Decoys planted beside each held-out copy: code that cannot compute the answer and guesses among
# the copies (or the tables a built title's copies look up) is right 1 time in DECOYS + 1.
DECOYS = 7
# Held-out entries per grading: each plants its copy and decoys (times a parametrized test's
# parameter sets) into the graded run, so they are drawn at random among those the reference run
# recorded (at most CAPTURED, two copies each), not one per F2P test: a guess passes them all 1
# time in (DECOYS + 1) ** HELD_OUT.
HELD_OUT = 4
CAPTURED = 12


def decoys(value: object, n: int, rng) -> list:
    """Up to `n` values unlike `value` from which `value` cannot be told apart as the original:
    the wrong expected values of a held-out variant's decoys (featdel.grading.held_out,
    featdel.lang.javascript.held_out), where code that reads the planted tests sees them all and
    must not learn which is right without computing it. So each is changed the way the original
    could have been from it: an int or float moved by a whole number, all of them and the value
    in one window of 98 placed at random (so the value is not their centre), a bool negated, a str
    with one character replaced by another of its class (the same position for all, so no one of
    them is the centre of the others), a list, tuple or dict with its first element (value) so
    changed. None, empty values and anything else have no such partner: []. `rng`: a
    `random.Random`-like source drawn apart from every other canary's."""
    if isinstance(value, bool):
        return [not value][:n]
    if isinstance(value, (int, float)):
        # others drawn in a window of 98 placed at random around the value: every member of the
        # set is then as likely to be the value (a decoy at value +- k would leave it the centre)
        low = -rng.randrange(98)
        return [moved for k in rng.sample([k for k in range(low, low + 98) if k], n) if (moved := value + k) != value]
    if isinstance(value, str):
        if not value:
            return []
        at = rng.randrange(len(value))
        old = value[at]
        pool = ("0123456789" if old.isdigit() else "abcdefghijklmnopqrstuvwxyz" if old.islower()
                else "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if old.isupper() else " .,;:-_!?").replace(old, "")
        return [value[:at] + c + value[at + 1:] for c in rng.sample(pool, min(n, len(pool)))]
    if isinstance(value, (list, tuple)) and value:
        return [type(value)([head, *value[1:]]) for head in decoys(value[0], n, rng)]
    if isinstance(value, dict) and value:
        first = next(iter(value))
        return [{**value, first: head} for head in decoys(value[first], n, rng)]
    return []

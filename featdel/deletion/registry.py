"""The strategy registry, the seeded entry point, and deterministic (candidate, strategy) picks.

In: candidates from the miner, strategy names, a seed. Out: `Deletion`s (via `delete`) or the
pairs worth trying (via `choose`). Each `delete` call draws its own `random.Random` from the seed
and the pair, so a result never depends on which other pairs ran before it or in what order.
A strategy that needs configuration (`agent`: a model server) sits in the registry unconfigured,
fitting nothing; `options` ({name: {option: value}}, plain JSON so a run records it) passed to
`strategy`, `choose` and `delete` give its `configured(**options)` copy instead.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable
from pathlib import Path

from featdel.core.records import Candidate, Deletion
from featdel.deletion.agent import AgentStrategy
from featdel.deletion.base import Check, Strategy, UnknownStrategy
from featdel.deletion.body import BodyStrategy
from featdel.deletion.combine import CombineStrategy
from featdel.deletion.feature import FeatureStrategy
from featdel.deletion.file import FileStrategy
from featdel.deletion.remove import RemovalStrategy

STRATEGIES: dict[str, Strategy] = {
    "body": BodyStrategy(),
    "function": RemovalStrategy("function", "function"),
    "method": RemovalStrategy("method", "method"),
    "class": RemovalStrategy("class", "class"),
    "file": FileStrategy(),
    "feature": FeatureStrategy(),
    "combine": CombineStrategy(),  # joins verified deletions after verify (featdel.pipeline.delete.combine_all)
    "agent": AgentStrategy(),  # a language model deletes through tools; needs options (see above)
}

Options = dict[str, dict] | None


def strategy(name: str, options: Options = None) -> Strategy:
    try:
        found = STRATEGIES[name]
    except KeyError:
        raise UnknownStrategy(f"unknown strategy {name!r}; known: {', '.join(STRATEGIES)}") from None
    given = (options or {}).get(name)
    return found.configured(**given) if given else found


def delete(
    root: Path,
    candidate: Candidate,
    name: str,
    *,
    check: Check,
    keep_docstrings: bool = True,
    seed: int = 0,
    options: Options = None,
) -> Deletion:
    """Apply one strategy to one candidate; raises `NotApplicable` (or `RolledBack`) with the
    reason when it does not fit."""
    rng = random.Random(f"{seed}\0{candidate.repo}\0{candidate.path}::{candidate.qualname}\0{name}")
    found = strategy(name, options).apply(Path(root), candidate, check=check, keep_docstrings=keep_docstrings, rng=rng)
    return dataclasses.replace(found, seed=seed)


def choose(
    candidates: Iterable[Candidate],
    strategies: Iterable[str],
    rng: random.Random,
    max_pairs: int,
    options: Options = None,
) -> list[tuple[Candidate, str]]:
    """Up to `max_pairs` (candidate, strategy) pairs, spread over candidates first: round r
    gives each candidate (in a seeded order) its r-th strategy (in a seeded order)."""
    chosen = {n: strategy(n, options) for n in strategies}
    names = sorted({s.name for s in chosen.values()})
    ordered = sorted(candidates, key=lambda c: (c.repo, c.path, c.qualname, c.kind))
    rng.shuffle(ordered)
    plans = []
    for c in ordered:
        fitting = [n for n in names if chosen[n].fits(c)]
        rng.shuffle(fitting)
        plans.append((c, fitting))
    out: list[tuple[Candidate, str]] = []
    rounds = max((len(f) for _, f in plans), default=0)
    for r in range(rounds):
        for c, fitting in plans:
            if len(out) >= max_pairs:
                return out
            if r < len(fitting):
                out.append((c, fitting[r]))
    return out

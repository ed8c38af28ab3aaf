"""Steered generation: per candidate, the knobs whose predicted pass rate is nearest a target.

In: a learner's fitted `DifficultyModel`, a target pass rate, and candidates, each with the
knob settings open to it and the difficulty features each setting would give. Out: one
`Choice` per candidate (knobs and predicted pass rate), closest to the target first.

The knobs: the strategy (and with it the deletion's size), docstrings kept or stripped, tests
visible or hidden, and how many deletions are combined. `featdel run --target-pass-rate` plans
on features estimated from the candidate before anything is deleted (`estimate`): its lines and
cyclomatic complexity, the tests that run it, how often its name is referenced. Similarity,
known only after verification, is set to the learner's typical value. The model predicts at the
round after the learner's last, so as the learner's pass rate rises generation moves to harder
settings.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from featdel.curriculum.model import NUMERIC, DifficultyModel


@dataclass(frozen=True, kw_only=True, slots=True)
class Knobs:
    strategy: str
    docstrings_kept: bool = True
    tests_visible: bool = True
    combined: int = 1  # deletions joined into one task


@dataclass(frozen=True, kw_only=True, slots=True)
class Choice:
    key: str  # the candidate
    knobs: Knobs
    predicted: float
    difficulty: dict

    def record(self, *, learner: str, target: float) -> dict:
        """The row `featdel package` stores in the task's `steering` column."""
        return {"learner": learner, "target_pass_rate": target, "predicted_pass_rate": round(self.predicted, 4),
                **asdict(self.knobs)}


def with_knobs(difficulty: dict, knobs: Knobs) -> dict:
    return {**difficulty, "docstrings_kept": knobs.docstrings_kept, "tests_visible": knobs.tests_visible}


def choose(options: dict[str, list[tuple[Knobs, dict]]], model: DifficultyModel, target: float, *,
           round: int | None = None, seed: int = 0) -> list[Choice]:
    """Per candidate the (knobs, features) whose predicted pass rate is nearest `target`; the
    candidates ordered nearest first (ties in a seeded order)."""
    rng = random.Random(seed)
    best = []
    for key in sorted(options):
        scored = [Choice(key=key, knobs=k, difficulty=d, predicted=model.predict(d, k.strategy, round=round))
                  for k, d in options[key]]
        if scored:
            best.append(min(scored, key=lambda c: abs(c.predicted - target)))
    rng.shuffle(best)
    return sorted(best, key=lambda c: round_to(abs(c.predicted - target)))


def round_to(x: float, step: float = 0.005) -> float:
    return round(x / step) * step


def combined(parts: list[dict]) -> dict:
    """Features of deletions joined into one task: counts add up, similarity is the highest."""
    out = {k: sum(int(p.get(k) or 0) for p in parts) for k in NUMERIC + ("pass_to_pass",)}
    out["similarity"] = max(float(p.get("similarity") or 0.0) for p in parts)
    return out


def knob_space(strategies: Iterable[str], *, docstrings: bool = True, tests: bool = True) -> list[Knobs]:
    return [Knobs(strategy=s, docstrings_kept=dk, tests_visible=tv) for s in strategies
            for dk in ((True, False) if docstrings else (True,)) for tv in ((True, False) if tests else (True,))]


def identifier_counts(root: Path) -> Counter:
    """How often each identifier occurs in the tree (one walk for all candidates)."""
    from featdel.code.spans import parse, python_files

    counts: Counter = Counter()
    for path in python_files(root):
        stack = [parse(path.read_bytes()).root_node]
        while stack:
            node = stack.pop()
            if node.type == "identifier":
                counts[node.text.decode()] += 1
            stack.extend(node.children)
    return counts


def estimate(candidate, original: Path, counts: Counter, typical_similarity: float) -> dict:
    """Difficulty features a candidate's deletion would have, before it is made."""
    from featdel.code.spans import symbols
    from featdel.deletion.difficulty import cyclomatic

    source = (original / candidate.path).read_bytes()
    text, lines = source.decode(errors="replace"), len(source.splitlines())
    if candidate.kind != "file":
        found = [s for s in symbols(source, candidate.path) if s.qualname == candidate.qualname]
        if found:
            text, lines = source[found[0].start_byte : found[0].end_byte].decode(errors="replace"), found[0].lines
    name = candidate.qualname.rsplit(".", 1)[-1] if candidate.qualname else Path(candidate.path).stem
    return {"deleted_lines": lines, "deleted_symbols": 1, "files": 1, "cyclomatic": cyclomatic([text]),
            "fail_to_pass": len(candidate.tests), "references": max(0, counts[name] - 1),
            "similarity": typical_similarity, "docstrings_kept": True, "tests_visible": True}


def typical_similarity(model: DifficultyModel) -> float:
    return float(model.mean[len(NUMERIC)])

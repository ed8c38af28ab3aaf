"""Trajectories: token in, token out, kept exactly, and saved as JSON Lines.

In: what an episode produced. Out: a `Trajectory` whose `tokens` are the whole episode (prompt,
the policy's sampled ids, observations) and whose `mask` is 1 exactly on the policy's own
tokens, so a loss trains only those; each `Turn` says where its action starts (`action_start`,
the position a hint is inserted before for the teacher: `featdel.trainer.rl_loss.insert_hint`),
what was parsed and what was observed, and the task's language (lines written before it was
recorded read as Python's). One trajectory is one JSON line
(`save_trajectories`/`read_trajectories`), for the monitor and for inspection; the ids are
never re-tokenised from text, so the trainer scores what was sampled.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, kw_only=True, slots=True)
class Turn:
    index: int
    action_start: int  # position in `Trajectory.tokens` of the turn's first policy token
    action_ids: list[int]
    logprobs: list[float]  # log-probabilities the policy sampled them with
    action_text: str
    call: dict | None  # {"name": ..., "args": ...} when the turn parsed as a valid call
    error: str | None  # "malformed" | "unknown_tool" when it did not
    observation: str
    ok: bool  # the call ran without an error observation
    touched: list[str] = field(default_factory=list)
    ran_tests: bool = False
    hit_cap: bool = False  # the action used all of `max_action_tokens` without ending its line
    obs_start: int = 0  # position of the observation's first token
    obs_len: int = 0

    def call_key(self) -> str:
        """The same call (or the same broken text) has the same key."""
        return json.dumps(self.call, sort_keys=True) if self.call is not None else "text:" + self.action_text


HINT_OPEN, HINT_CLOSE = "<hint>", "</hint>\n"


@dataclass(frozen=True, kw_only=True, slots=True)
class Hint:
    turn: int  # the turn whose behaviour it targets
    at: int  # that turn's `action_start`: the teacher sees the hint inserted there
    rule: str
    text: str

    def ids(self, encode=None) -> list[int]:
        """The hint as the teacher reads it, on a line of its own before the turn's action:
        `insert_hint(traj.tokens, hint.at, hint.ids())` (featdel.trainer.rl_loss). `encode`: the
        episode's codec's (default: bytes)."""
        text = HINT_OPEN + self.text + HINT_CLOSE
        return encode(text) if encode else list(text.encode("utf-8", errors="replace"))


@dataclass(frozen=True, kw_only=True, slots=True)
class Trajectory:
    instance_id: str
    rollout: int
    seed: int
    prompt_len: int
    tokens: list[int]
    mask: list[int]  # 1 on the policy's own tokens, 0 on the prompt and observations
    turns: list[Turn]
    hints: list[Hint]
    ended: str  # "submitted" | "turn_budget" | "token_budget" | "error" (the episode raised)
    patch: str
    reward: float
    status: str  # the grader's status; "not_submitted"; "broken": not the learner's doing, do not train on it
    reason: str = ""
    seconds: float = 0.0
    language: str = "python"  # the task's (featdel.lang): which files the monitor takes for tests and config

    def policy_tokens(self) -> list[int]:
        return [t for t, m in zip(self.tokens, self.mask, strict=True) if m]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, row: dict) -> Trajectory:
        row = dict(row)
        row["turns"] = [Turn(**t) for t in row["turns"]]
        row["hints"] = [Hint(**h) for h in row["hints"]]
        return cls(**row)


def save_trajectories(path: Path, trajectories: list[Trajectory]) -> None:
    """Append one JSON line per trajectory."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as fh:
        for traj in trajectories:
            fh.write(json.dumps(traj.to_dict()) + "\n")  # ASCII: lone surrogates survive


def read_trajectories(path: Path) -> list[Trajectory]:
    return [Trajectory.from_dict(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]

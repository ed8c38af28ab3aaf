"""Hints: rules that read a turn and its observation and may emit a short textual hint.

In: the turn just taken, the turns before it, and what the rules need to know about the task
(`HintContext`). Out: `Hint`s that target that turn. A hint is not shown to the policy during the
episode: it is recorded in the trajectory, and targeted distillation runs the same model as a
teacher on the context with the hint inserted before the targeted turn's action (mission.md,
"Targeted RL"). So a hint says what the better action would have known, briefly.

Adding a rule is one small class with a `name` and a `check` returning the hint text or None,
registered in `RULES`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from featdel.agent.protocol import TOOLS, render, schema, tools_text
from featdel.agent.trajectory import Hint, Turn
from featdel.grading.grade import protected


@dataclass(frozen=True, kw_only=True, slots=True)
class HintContext:
    test_files: frozenset[str] = field(default_factory=frozenset)  # files of the task's tests
    max_action_chars: int = 2000  # an action longer than this is "far too long"
    language: str = "python"  # the task's: its test files and runner configuration are protected


class Rule(Protocol):
    name: str

    def check(self, turn: Turn, history: list[Turn], ctx: HintContext) -> str | None: ...


class UnknownTool:
    name = "unknown_tool"

    def check(self, turn, history, ctx):
        if turn.error == "unknown_tool":
            return f"Reminder: the available tools are {', '.join(TOOLS)}."
        return None


class MalformedCall:
    name = "malformed_call"

    def check(self, turn, history, ctx):
        if turn.error != "malformed":
            return None
        named = next((n for n in TOOLS if f'"{n}"' in turn.action_text), None)
        shape = schema(named) if named else tools_text().replace("\n", "; ")
        return ("A tool call is one line: " + render("read_file", {"path": "README.md"}).strip()
                + f" Tools: {shape}")


class TestEdit:
    name = "test_edit"

    def check(self, turn, history, ctx):
        hit = [p for p in turn.touched if protected(p, set(ctx.test_files), ctx.language)]
        if hit:
            return (f"The tests and test configuration are fixed ({hit[0]}): edits to them are not graded. "
                    "Change the source code so the existing tests pass.")
        return None


class SubmitUntested:
    name = "submit_untested"

    def check(self, turn, history, ctx):
        if not turn.call or turn.call["name"] != "submit":
            return None
        last_edit = max((t.index for t in history if t.touched), default=-1)
        tested = any(t.ran_tests and t.index > last_edit for t in history)
        if not tested:
            return "Run the tests (run_tests) after your last edit and read the result before you submit."
        return None


class RepeatedFailure:
    name = "repeated_failure"

    def check(self, turn, history, ctx):
        if turn.ok:
            return None
        if any(not t.ok and t.call_key() == turn.call_key() for t in history):
            return "This exact call already failed with the same error: change the call or try another approach."
        return None


class LongOutput:
    name = "long_output"

    def check(self, turn, history, ctx):
        if turn.hit_cap or len(turn.action_text) > ctx.max_action_chars:
            return "Keep each turn short: one tool call on one line, then wait for its result."
        return None


RULES: dict[str, Rule] = {rule.name: rule for rule in (
    UnknownTool(), MalformedCall(), TestEdit(), SubmitUntested(), RepeatedFailure(), LongOutput())}


def hints_for(turn: Turn, history: list[Turn], ctx: HintContext, rules: dict[str, Rule] | None = None) -> list[Hint]:
    """Every hint the rules emit for `turn` (`history`: the turns before it)."""
    out = []
    for name, rule in (RULES if rules is None else rules).items():
        text = rule.check(turn, history, ctx)
        if text:
            out.append(Hint(turn=turn.index, at=turn.action_start, rule=name, text=text))
    return out

"""The textual tool protocol: how a learner's output becomes a tool call, strictly.

In: the text of one turn (what the policy produced, decoded from its token ids). Out: a
`ToolCall` with validated arguments, or a `CallError` saying what was wrong. Never an exception:
the text is untrusted model output, and a byte-level model's first outputs are noise.

One call per turn, on one line, so a byte-level model ends its turn with a newline (`STOP`):

    <tool>{"name": "read_file", "args": {"path": "pkg/mod.py"}}</tool>

Text before the call is allowed (and counted against the turn's length); a turn without exactly
one complete call, a call that is not a JSON object `{"name": str, "args": object}`, or
arguments that do not match the tool's schema is `malformed`; a name not in `TOOLS` is
`unknown_tool`. Arguments are checked by pydantic models in strict mode, extra keys forbidden.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

OPEN, CLOSE = "<tool>", "</tool>"
STOP = "\n"  # a turn ends at the first newline: the call format is one line
# The call format in words, for a model that reads text (a chat model's system message): a
# model trained here learns the format from its warm-up; a pretrained one must be told.
CALL_FORMAT = (f'Reply with exactly one line, one tool call: {OPEN}{{"name": TOOL, "args": {{...}}}}{CLOSE}, for '
               f'example {OPEN}{{"name": "read_file", "args": {{"path": "README.md"}}}}{CLOSE}')


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class ListDir(_Args):
    """List a directory of the work tree ("." is its root)."""

    path: str = "."


class ReadFile(_Args):
    """Read a text file, optionally from line `start` (1-based) for `lines` lines."""

    path: str
    start: int = Field(default=1, ge=1)
    lines: int | None = Field(default=None, ge=1)


class WriteFile(_Args):
    """Write (create or replace) a text file."""

    path: str
    content: str


class ApplyPatch(_Args):
    """Apply a unified diff (paths relative to the work tree, a/ and b/ prefixes)."""

    patch: str


class RunTests(_Args):
    """Run tests in the sandbox: the given pytest node ids, or the task's failing tests."""

    tests: list[str] | None = None


class Submit(_Args):
    """End the episode; the work tree as it is now is graded."""


# The registry of tools: name -> argument schema. The workspace implements each name.
TOOLS: dict[str, type[_Args]] = {
    "list_dir": ListDir,
    "read_file": ReadFile,
    "write_file": WriteFile,
    "apply_patch": ApplyPatch,
    "run_tests": RunTests,
    "submit": Submit,
}


class CallErrorKind(StrEnum):
    MALFORMED = "malformed"
    UNKNOWN_TOOL = "unknown_tool"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCall:
    name: str
    args: dict = field(default_factory=dict)  # validated, defaults filled in
    prefix: str = ""  # text before the call

    def key(self) -> str:
        """A canonical form: the same call twice has the same key."""
        return json.dumps({"name": self.name, "args": self.args}, sort_keys=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class CallError:
    kind: CallErrorKind
    message: str
    name: str | None = None  # the tool named, when one was


_CALL = re.compile(re.escape(OPEN) + r"(.*?)" + re.escape(CLOSE), re.DOTALL)


def parse(text: str) -> ToolCall | CallError:
    """The one tool call in `text`, or why there is none (see the module docstring)."""
    found = _CALL.findall(text)
    if len(found) != 1:
        what = "no complete" if not found else f"{len(found)} calls, not one"
        return CallError(kind=CallErrorKind.MALFORMED, message=f"{what} {OPEN}...{CLOSE} call in the turn")
    try:
        raw = json.loads(found[0])
    except (ValueError, RecursionError) as exc:  # RecursionError: deeply nested brackets
        return CallError(kind=CallErrorKind.MALFORMED, message=f"the call is not JSON: {str(exc)[:120]}")
    if not isinstance(raw, dict) or set(raw) - {"name", "args"} or not isinstance(raw.get("name"), str):
        return CallError(kind=CallErrorKind.MALFORMED,
                         message='the call must be a JSON object {"name": string, "args": object}')
    name, args = raw["name"], raw.get("args", {})
    if name not in TOOLS:
        return CallError(kind=CallErrorKind.UNKNOWN_TOOL, name=name[:80], message=f"no tool named {name[:80]!r}")
    if not isinstance(args, dict):
        return CallError(kind=CallErrorKind.MALFORMED, name=name, message="args must be a JSON object")
    try:
        validated = TOOLS[name].model_validate(args)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "args"
        return CallError(kind=CallErrorKind.MALFORMED, name=name, message=f"{name}: {where}: {first['msg']}")
    return ToolCall(name=name, args=validated.model_dump(), prefix=text[: text.index(OPEN)])


def render(name: str, args: dict | None = None) -> str:
    """A call as a policy should write it (one line, ending with `STOP`)."""
    return OPEN + json.dumps({"name": name, "args": args or {}}) + CLOSE + STOP


def schema(name: str) -> str:
    """One line per tool: its name, arguments with types, and what it does."""
    model = TOOLS[name]
    params = ", ".join(f"{arg}: {_type(info.annotation)}" + ("" if info.is_required() else f" = {info.default!r}")
                       for arg, info in model.model_fields.items())
    return f"{name}({params}): {model.__doc__.strip()}"


def _type(annotation) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def tools_text() -> str:
    return "\n".join(schema(name) for name in TOOLS)

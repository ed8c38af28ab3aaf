"""The `agent` strategy: a language model removes one testable feature, through tools.

In: the original tree (never written), a candidate (the area the coverage map selected, with the
tests that cover it), the caller's check, and an `AgentConfig` (an OpenAI-compatible server, a
model, a turn budget). Out: a `Deletion` like every other strategy's, so verification, scrubbing,
the leak audit and packaging are the existing code paths; `RolledBack` when the model's final
tree fails the check, `NotApplicable` when it changed nothing.

The model works on a copy of the tree with the learner's file tools (featdel.agent.workspace:
paths confined to the copy) plus `delete_file`, `check` (the caller's build check on the edits so
far: parses, imports, collects, and what the edit deletes so far) and `done` (optionally with a
problem statement, carried on the `Deletion` and leak-audited like any statement). When the
check can run tests (featdel.deletion.tested, as `featdel delete`/`run` give it), `check` also
reports which covering tests now fail. Only `.py`
files outside the tests may change. Model output is untrusted text: malformed arguments, unknown
tools and refused paths become an error message back to the model, never an exception. What was
deleted is read back from the edits (featdel.deletion.observed).
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from featdel.agent import protocol
from featdel.code.spans import is_test_path
from featdel.core.records import Candidate, Deletion
from featdel.deletion.base import (
    Check,
    Edits,
    KindStrategy,
    NotApplicable,
    RolledBack,
    Tree,
    make_deletion,
    passes,
)
from featdel.deletion.observed import observe

MAX_TREE_LINES = 300  # files listed in the first message
MAX_TESTS_SHOWN = 40
MAX_TESTS_RUN = 20  # covering tests the `check` tool runs, when the check can run tests
_IGNORE = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.pyc", ".tox", ".nox")


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentConfig:
    base_url: str
    model: str
    max_turns: int = 30
    api_key_env: str = "FEATDEL_API_KEY"
    timeout_s: float = 120.0
    temperature: float | None = None
    max_tokens: int | None = None  # a reply's length cap (None: the server's)

    def __post_init__(self):
        if self.max_turns < 1:
            raise ValueError(f"max_turns must be at least 1 (got {self.max_turns})")


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class DeleteFile(_Args):
    """Remove a Python source file of the work tree."""

    path: str


class CheckTree(_Args):
    """Run the build check on the work tree as it is now (parses, imports, collects the tests)
    and, where the run can, the covering tests: which of them now fail."""


class Done(_Args):
    """Finish. Optionally give the problem statement: what the missing feature does and its
    interface, for a developer who must re-implement it, never quoting the removed code."""

    statement: str | None = Field(default=None, max_length=20000)


TOOLS: dict[str, type[BaseModel]] = {
    **{n: protocol.TOOLS[n] for n in ("list_dir", "read_file", "write_file", "apply_patch")},
    "delete_file": DeleteFile,
    "check": CheckTree,
    "done": Done,
}

SYSTEM = """You turn a well-tested Python repository into a coding task by deleting a feature.
Remove one testable feature, possibly across files: the function, its private helpers, where it
is registered or re-exported. Afterwards the repository must still import and its test suite must
still run (collect); the tests that exercised the feature should then fail.
Rules: never edit tests (tests/, test_*.py, *_test.py, conftest.py); change only .py source files;
remove code rather than rewrite it. Call `check` after editing, fix what it reports, and call
`done` when the check passes. With `done` you may give a problem statement describing what the
missing feature does and its interface (names, parameters, behaviour) without quoting its code."""


def first_message(root: Path, candidate: Candidate, max_turns: int) -> str:
    """The repository tree, the area the coverage map selected and the tests that cover it."""
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    shown = files[:MAX_TREE_LINES] + ([f"... {len(files) - MAX_TREE_LINES} more"] if len(files) > MAX_TREE_LINES else [])
    area = (f"the module `{candidate.path}`" if candidate.kind == "file"
            else f"`{candidate.path}::{candidate.qualname}` ({candidate.kind}, {candidate.lines} lines)")
    tests = candidate.tests[:MAX_TESTS_SHOWN]
    more = [f"- ... and {len(candidate.tests) - len(tests)} more"] if len(candidate.tests) > len(tests) else []
    return "\n".join([
        "Repository files:", *shown, "",
        f"The area the coverage map selected: {area}.",
        f"Tests that cover it ({len(candidate.tests)}):", *[f"- {t}" for t in tests], *more, "",
        ("Remove one testable feature in this area so that the repository still imports and its test "
         f"suite still runs. You have {max_turns} turns."),
    ])


class Session:
    """One model's edits on a copy of the tree: `call(name, raw_arguments)` -> the text it sees."""

    def __init__(self, original: Path, work: Path, check: Check, tests: list[str] = ()):
        from featdel.agent.workspace import Workspace

        self.original, self.work, self.check, self.tests = original, work, check, list(tests)[:MAX_TESTS_RUN]
        self.workspace = Workspace(work, None, None)
        self.touched: list[str] = []
        self.done, self.statement = False, ""

    def call(self, name: str, raw: str) -> str:
        if name not in TOOLS:
            return f"error: no tool named {name[:80]!r}; tools: {', '.join(TOOLS)}"
        try:
            args = json.loads(raw or "{}")
        except (ValueError, RecursionError) as exc:
            return f"error: the arguments of {name} are not JSON ({str(exc)[:120]}); send a JSON object"
        if not isinstance(args, dict):
            return f"error: the arguments of {name} must be a JSON object"
        try:
            valid = TOOLS[name].model_validate(args).model_dump()
        except ValidationError as exc:
            first = exc.errors()[0]
            return f"error: {name}: {'.'.join(str(p) for p in first['loc']) or 'args'}: {first['msg']}"
        return getattr(self, f"_{name}", self._file_tool)(name, valid)

    def _refusal(self, paths: list[str]) -> str | None:
        for rel in paths:
            norm = PurePosixPath(rel).as_posix()
            if is_test_path(norm):
                return f"error: {rel} is test code; the tests must stay as they are"
            if not norm.endswith(".py"):
                return f"error: {rel} is not a .py file; only Python source files may change"
        return None

    def _file_tool(self, name: str, args: dict) -> str:
        from featdel.agent.workspace import patch_paths

        paths = [args["path"]] if name == "write_file" else patch_paths(args["patch"]) if name == "apply_patch" else []
        if refused := self._refusal(paths):
            return refused
        obs = self.workspace.execute(protocol.ToolCall(name=name, args=args))
        self.touched += [PurePosixPath(p).as_posix() for p in obs.touched]
        return obs.text

    def _delete_file(self, name: str, args: dict) -> str:
        from featdel.agent.workspace import PathRefused, confine

        if refused := self._refusal([args["path"]]):
            return refused
        try:
            target = confine(self.work, args["path"])
        except PathRefused as exc:
            return f"error: {exc}"
        if not target.is_file() or target.is_symlink():
            return f"error: {args['path']} is not a file"
        target.unlink()
        self.touched.append(PurePosixPath(args["path"]).as_posix())
        return f"deleted {args['path']}"

    def _check(self, name: str, args: dict) -> str:
        edits = self.edits()
        if not edits:
            return "nothing is changed yet"
        ok, reason = passes(self.check, edits)
        found = observe(Tree.open(self.original), edits).summary()
        if not ok:
            return f"check failed: {reason}. {found}"
        return f"ok: the tree parses, imports and collects. {found}" + self._covering(edits)

    def _covering(self, edits: Edits) -> str:
        """Which covering tests the edit makes fail, when the check can run tests (deletion.tested)."""
        run = getattr(self.check, "run_tests", None)
        if run is None or not self.tests:
            return ""
        outcomes = run(edits, self.tests)
        failing = [t for t, o in outcomes.items() if o != "passed"]
        lines = [f"{len(failing)} of the {len(outcomes)} covering tests run now fail:"]
        return "\n" + "\n".join(lines + [f"{o}: {t}" for t, o in outcomes.items()])

    def _done(self, name: str, args: dict) -> str:
        self.done, self.statement = True, (args["statement"] or "").strip()
        return "done"

    def edits(self) -> Edits:
        """Every touched path whose text differs from the original (None: removed)."""
        out: Edits = {}
        for rel in dict.fromkeys(self.touched):
            now, before = self.work / rel, self.original / rel
            text = now.read_text(encoding="utf-8", errors="replace") if now.is_file() else None
            old = before.read_text(encoding="utf-8", errors="replace") if before.is_file() else None
            if text != old:
                out[rel] = text
        return dict(sorted(out.items()))


def run_session(client, original: Path, work: Path, candidate: Candidate, check: Check, max_turns: int) -> Session:
    """The tool loop: up to `max_turns` replies, each answered tool call by tool call."""
    from featdel.core.llm import tool_schemas

    session, schemas = Session(original, work, check, candidate.tests), tool_schemas(TOOLS)
    messages = [{"role": "system", "content": SYSTEM},
                {"role": "user", "content": first_message(work, candidate, max_turns)}]
    for _ in range(max_turns):
        reply = client.chat(messages, tools=schemas)
        calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                 for c in reply.tool_calls]
        messages.append({"role": "assistant", "content": reply.content or None, **({"tool_calls": calls} if calls else {})})
        if not calls:
            messages.append({"role": "user", "content": "Use the tools; call `done` when the feature is removed."})
        for c in reply.tool_calls:
            text = session.call(c.name, c.arguments) if not session.done else "ignored: already done"
            messages.append({"role": "tool", "tool_call_id": c.id, "content": text})
        if session.done:
            break
    return session


class AgentStrategy(KindStrategy):
    """Unconfigured in the registry (fits nothing); `configured(...)` gives a usable one."""

    name = "agent"
    kinds = frozenset({"function", "method", "class", "file"})

    def __init__(self, config: AgentConfig | None = None):
        self.config = config

    def configured(self, **options) -> AgentStrategy:
        return AgentStrategy(AgentConfig(**options))

    def fits(self, candidate: Candidate) -> bool:
        return self.config is not None and super().fits(candidate)

    def apply(self, root: Path, candidate: Candidate, *, check: Check, keep_docstrings: bool,
              rng: random.Random) -> Deletion:
        if self.config is None:
            raise NotApplicable("the agent strategy needs a model: --agent-url URL --agent-model NAME")
        if not super().fits(candidate):
            raise NotApplicable(f"kind {candidate.kind!r} at {candidate.path} is not an agent target")
        from featdel.core.llm import ChatClient

        cfg = self.config
        client = ChatClient(cfg.base_url, cfg.model, api_key_env=cfg.api_key_env, timeout_s=cfg.timeout_s,
                            temperature=cfg.temperature, max_tokens=cfg.max_tokens)
        with tempfile.TemporaryDirectory(prefix="featdel-agent-") as tmp:
            work = Path(tmp) / "repo"
            shutil.copytree(root, work, symlinks=True, ignore=_IGNORE)
            session = run_session(client, Path(root), work, candidate, check, self.config.max_turns)
            edits = session.edits()
        used = client.usage
        ended = (("called done" if session.done else f"ran out of {self.config.max_turns} turns")
                 + f"; {used['requests']} requests, {used['prompt_tokens']}+{used['completion_tokens']} tokens")
        if not edits:
            raise NotApplicable(f"the agent changed nothing ({ended})")
        ok, reason = passes(check, edits)
        if not ok:
            raise RolledBack(f"the agent's edit fails the check ({ended}): {reason}")
        seen = observe(Tree.open(root), edits)
        if not seen.deleted:
            raise RolledBack(f"the agent's edit deletes no function, method or class ({ended})")
        deletion = make_deletion(candidate, self.name, keep_docstrings=keep_docstrings and bool(seen.stubbed),
                                 deleted=seen.deleted, files=edits, removed=seen.removed, stubbed=seen.stubbed,
                                 wiring=seen.wiring)
        # the model's statement, when it wrote one, is what verify leak-audits and package ships
        return dataclasses.replace(deletion, statement=session.statement, usage=dict(used))

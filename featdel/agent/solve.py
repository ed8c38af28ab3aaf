"""`featdel solve`: any served chat model (or a `featdel train` checkpoint) as the learner.

In: a packaged run's tasks (`featdel.agent.episode.load_agent_tasks`), a learner and a sandbox
backend. Out: SWE-bench predictions (`instance_id`, `model_patch`, `model_name_or_path`) for
`featdel evaluate`, and one `Trajectory` per task in the same JSON Lines format the trainer
writes, so `featdel monitor` reads both.

A chat model plays the very environment the token policies play (`episode.TaskEnv`: the work
tree, the tools, `run_tests` in the sandbox, the grader): the prompt is `episode.prompt_text`,
the tools are the protocol's `TOOLS` as OpenAI function schemas, and every tool call is checked
by the protocol's own strict parser before the workspace runs it. One call runs per turn; a
reply with several gets an error for the rest, one with none gets a nudge (both count as turns).
The turns are kept as text and parsed calls (no token ids: `tokens` and `mask` stay empty). A
conversation that outgrows the model's context (HTTP 400 naming the context) ends the episode
like a token budget, and what the learner did so far is graded.

A learner that fails (the model server died, a checkpoint that cannot act) makes an `error`
record for that task and the batch goes on; an errored task writes no prediction, so a rerun
retries it, and tasks already in the predictions file are skipped (resumable).
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from featdel.agent.episode import (
    AgentTask,
    EpisodeConfig,
    TaskEnv,
    final_patch,
    load_agent_tasks,
    run_episode,
)
from featdel.agent.hints import hints_for
from featdel.agent.protocol import (
    CLOSE,
    OPEN,
    TOOLS,
    CallError,
    CallErrorKind,
    ToolCall,
    parse,
    render,
)
from featdel.agent.trajectory import Hint, Trajectory, Turn
from featdel.agent.workspace import Observation

SYSTEM = ("You are a careful software engineer. You work in a repository only through the tools you are "
          "given: one tool call per reply. Change the source code, never the tests, then run the tests and "
          "call submit when they pass.")
NUDGE = "No tool was called. Reply with exactly one tool call ({tools}); call submit when you are done."


@dataclass(frozen=True, kw_only=True, slots=True)
class SolveResult:
    instance_id: str
    status: str  # the grader's status, "not_graded", or "error" (the learner or its server failed)
    reward: float = 0.0
    turns: int = 0
    ended: str = ""
    reason: str = ""
    seconds: float = 0.0


def check_call(name: str, arguments: str) -> ToolCall | CallError:
    """A tool call from a chat model, validated by the protocol's strict parser."""
    try:
        args = json.loads(arguments) if arguments.strip() else {}
    except (ValueError, RecursionError):
        return CallError(kind=CallErrorKind.MALFORMED, name=name[:80], message=f"{name[:80]}: the arguments are not JSON")
    return parse(render(name, args) if isinstance(args, dict) else OPEN + json.dumps({"name": name, "args": args}) + CLOSE)


def call_text(name: str, arguments: str) -> str:
    """A chat tool call in the protocol's text form, its arguments as the server sent them (so the
    monitor reads what the model wrote, valid or not)."""
    return OPEN + '{"name": ' + json.dumps(name) + ', "args": ' + (arguments.strip() or "{}") + "}" + CLOSE


CONTEXT_WORDS = ("context", "too long", "maximum", "tokens")


def context_exceeded(exc: Exception) -> bool:
    """Did the server refuse the request (HTTP 400) because the conversation is too long?"""
    cause = exc.__cause__
    return getattr(cause, "status_code", None) == 400 and any(w in str(cause).lower() for w in CONTEXT_WORDS)


class ChatLearner:
    """A model behind an OpenAI-compatible server (`featdel.core.llm.ChatClient`) in the tool loop."""

    def __init__(self, client, config: EpisodeConfig):
        self.client, self.config = client, config

    def episode(self, task: AgentTask, backend, workdir: Path, *, grade: bool = True) -> Trajectory:
        from featdel.core.llm import LLMError, tool_schemas

        started = time.monotonic()
        env = TaskEnv(task, backend, workdir, self.config)
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": env.prompt()}]
        schemas = tool_schemas(TOOLS)
        turns: list[Turn] = []
        hints: list[Hint] = []
        ended = "turn_budget"
        for index in range(self.config.max_turns):
            try:
                reply = self.client.chat(messages, tools=schemas)
            except LLMError as exc:
                if not turns or not context_exceeded(exc):
                    raise  # the server failed: the task is an error record, not a learner's failure
                ended = "token_budget"  # the conversation outgrew the model: the learner's budget is spent
                break
            turn, replies = self._turn(index, reply, env)
            messages += replies
            hints += hints_for(turn, turns, env.hint_ctx)
            turns.append(turn)
            if turn.call and turn.call["name"] == "submit" and turn.ok:
                ended = "submitted"
                break
        if grade:
            patch, reward, status, reason = env.finish(ended)
        else:
            patch, reward, status, reason = final_patch(env.start, env.work), 0.0, "not_graded", ""
        return Trajectory(instance_id=task.instance_id, rollout=0, seed=0, prompt_len=0, tokens=[], mask=[],
                          turns=turns, hints=hints, ended=ended, patch=patch, reward=reward, status=status,
                          reason=reason, seconds=round(time.monotonic() - started, 3), language=task.grade.language)

    def _turn(self, index: int, reply, env: TaskEnv) -> tuple[Turn, list[dict]]:
        """One reply: the call it makes (run on the tree) and the messages that answer it."""
        content = reply.content or ""
        if reply.tool_calls:
            first = reply.tool_calls[0]
            parsed = check_call(first.name, first.arguments)
            text = (content + "\n" if content else "") + call_text(first.name, first.arguments)
            assistant = {"role": "assistant", "content": content or None, "tool_calls": [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls]}
        elif OPEN in content:  # a call written as text, in the byte policies' format
            parsed, text, assistant = parse(content), content, {"role": "assistant", "content": content}
        else:
            names = ", ".join(TOOLS)
            obs = Observation(text="error: " + NUDGE.format(tools=names), ok=False)
            return (self._record(index, content, CallError(kind=CallErrorKind.MALFORMED, message="no tool call"), obs, reply),
                    [{"role": "assistant", "content": content}, {"role": "user", "content": NUDGE.format(tools=names)}])
        obs = (Observation(text=f"error: {parsed.message}", ok=False) if isinstance(parsed, CallError)
               else env.execute(parsed))
        if reply.tool_calls:
            answers = [{"role": "tool", "tool_call_id": reply.tool_calls[0].id, "content": obs.text}]
            answers += [{"role": "tool", "tool_call_id": c.id, "content": "error: one tool call per reply; this one "
                         "was not run"} for c in reply.tool_calls[1:]]
        else:
            answers = [{"role": "user", "content": obs.text}]
        return self._record(index, text, parsed, obs, reply), [assistant, *answers]

    @staticmethod
    def _record(index: int, text: str, parsed, obs: Observation, reply) -> Turn:
        error = isinstance(parsed, CallError)
        return Turn(index=index, action_start=0, action_ids=[], logprobs=[], action_text=text,
                    call=None if error else {"name": parsed.name, "args": parsed.args},
                    error=str(parsed.kind) if error else None, observation=obs.text, ok=obs.ok and not error,
                    touched=obs.touched, ran_tests=obs.ran_tests, hit_cap=reply.finish_reason == "length")


class PolicyLearner:
    """A token policy (a `featdel train` checkpoint) through `featdel.agent.episode.run_episode`."""

    def __init__(self, policy, config: EpisodeConfig):
        self.policy, self.config = policy, config

    def episode(self, task: AgentTask, backend, workdir: Path, *, grade: bool = True) -> Trajectory:
        return run_episode(task, self.policy, backend, config=self.config, workdir=workdir)


def done_ids(predictions: Path, model: str) -> set[str]:
    """The tasks `model` already has a prediction for in `predictions` (as `featdel evaluate` keys them)."""
    from featdel.grading.evaluate import read_predictions

    if not predictions.is_file():
        return set()
    return {p.instance_id for p in read_predictions(predictions) if not p.problem and p.model_name_or_path == model}


def solve(run_dir: Path, predictions: Path, trajectories: Path, learner, backend, *, model: str,
          ids: list[str] | None = None, jobs: int = 1, grade: bool = True,
          on_step: Callable[[str, str], None] = lambda item, step: None) -> list[SolveResult]:
    """Every task of the run (or `ids`) `model` has no prediction for yet: one episode each, appending a
    prediction and a trajectory as each task finishes. Returns this run's results."""
    lock = threading.Lock()
    skip = done_ids(predictions, model)

    def write(path: Path, row: dict) -> None:
        with lock:
            path.parent.mkdir(parents=True, exist_ok=True)
            with path.open("a") as fh:
                fh.write(json.dumps(row) + "\n")

    with tempfile.TemporaryDirectory(prefix="featdel-solve-") as tmp:
        tasks = load_agent_tasks(run_dir, Path(tmp), backend=backend, ids=ids)
        missing = [i for i in ids or [] if i not in tasks]
        for iid in tasks:
            if iid in skip:
                on_step(iid, "resumed")

        def failed(iid: str, reason: str, detail: str, started: float) -> SolveResult:
            write(trajectories, Trajectory(instance_id=iid, rollout=0, seed=0, prompt_len=0, tokens=[], mask=[],
                                           turns=[], hints=[], ended="error", patch="", reward=0.0, status="broken",
                                           reason=detail).to_dict())
            return SolveResult(instance_id=iid, status="error", reason=reason,
                               seconds=round(time.monotonic() - started, 3))

        def one(iid: str) -> SolveResult:
            on_step(iid, "solving")
            started, task = time.monotonic(), tasks[iid]
            if isinstance(task, str):  # the task cannot run here (its environment is missing)
                result = failed(iid, task, task, started)
            else:
                try:
                    traj = learner.episode(task, backend, Path(tmp) / "work" / iid, grade=grade)
                except Exception as exc:  # noqa: BLE001 - one task's failure is a record, not a dead batch
                    result = failed(iid, f"{type(exc).__name__}: {str(exc)[:300]}",
                                    traceback.format_exc(limit=3)[-1500:], started)
                else:
                    write(trajectories, traj.to_dict())
                    write(predictions, {"instance_id": iid, "model_name_or_path": model, "model_patch": traj.patch})
                    result = SolveResult(instance_id=iid, status=traj.status, reward=traj.reward,
                                         turns=len(traj.turns), ended=traj.ended, reason=traj.reason[:300],
                                         seconds=traj.seconds)
            on_step(iid, "done")
            return result

        todo = [i for i in tasks if i not in skip]
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="solve") as pool:
            results = list(pool.map(one, todo))
    return results + [SolveResult(instance_id=i, status="error", reason="no such task in the run") for i in missing]


def instance_ids(run_dir: Path, ids_file: Path | None = None) -> list[str]:
    """The ids listed in `ids_file` (one per line), else every packaged task of `run_dir`."""
    from featdel.core.errors import FeatdelError

    if ids_file is None:
        from featdel.core.shards import read_tasks

        return [r["instance_id"] for r in read_tasks(run_dir).select(["instance_id"]).to_pylist()]
    if not Path(ids_file).is_file():
        raise FeatdelError(f"--ids {ids_file} is not a file: give instance ids, one per line")
    return [line.strip() for line in Path(ids_file).read_text().splitlines() if line.strip()]


def trajectories_path(predictions: Path) -> Path:
    """Where the trajectories of `predictions` go by default: `NAME_trajectories.jsonl` beside it."""
    return predictions.with_name(predictions.name.removesuffix(".jsonl") + "_trajectories.jsonl")

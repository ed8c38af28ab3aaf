"""Episodes: one task, one policy, a sandboxed work tree, turns until a budget or `submit`.

In: an `AgentTask` (a `GradeTask` and its problem statement), a `Policy`, a sandbox backend and
an `EpisodeConfig`. Out: a `Trajectory` with every token, the mask of the policy's tokens, the
turns, the hints the rules emitted, and the reward: `featdel.grading.grade.grade` on the diff from the
start state to the final work tree, so the learner is graded exactly as `featdel evaluate`
grades a prediction. `rollouts` runs k episodes of one task in parallel threads, each in its own
work tree (every test run opens its own sandbox).

The token loop itself is `play(env, policy, config)` over any `Env` (prompt text, `execute`, the
hint context, `finish` -> patch and reward); `run_episode` is `play` on a `TaskEnv`, the
sandboxed packaged task. Other environments (the in-memory `bench.toyenv`) reuse the loop,
so their trajectories, observation framing and hints are the same by construction.

The work tree is the start state without VCS data; the pristine start state (a one-commit git
repository) stays outside the sandbox, and the final patch is computed against it from a scrubbed
copy of the work tree, in a repository of featdel's own (`featdel.code.hostgit`), so caches the test
runs left and anything written into the tree (a `.git/config`, a `.gitattributes`) cannot reach
the diff machinery.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import tempfile
import time
import traceback
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from featdel.agent.hints import HintContext, Rule, hints_for
from featdel.agent.policy import Codec, Policy, codec_of, frame_observation, frame_prompt
from featdel.agent.protocol import CallError, ToolCall, parse, render, tools_text
from featdel.agent.trajectory import Hint, Trajectory, Turn
from featdel.agent.workspace import Observation, Workspace
from featdel.code.trees import diff_trees, scrub, start_state
from featdel.grading.grade import GradeTask, grade


@dataclass(frozen=True, kw_only=True, slots=True)
class AgentTask:
    grade: GradeTask
    statement: str = ""

    @property
    def instance_id(self) -> str:
        return self.grade.instance_id


@dataclass(frozen=True, kw_only=True, slots=True)
class EpisodeConfig:
    max_turns: int = 30
    max_tokens: int = 65536  # the whole episode: prompt, actions and observations
    max_action_tokens: int = 2048  # one turn of the policy
    max_observation: int = 4000  # characters of one observation
    test_timeout_s: float = 120.0  # one run_tests call
    require_submit: bool = False  # True: an episode that ran out of budget earns 0 ungraded

    def __post_init__(self):
        for name in ("max_turns", "max_tokens", "max_action_tokens", "max_observation"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")


def prompt_text(task: AgentTask, visible_tests: list[str]) -> str:
    tests = "\n".join(visible_tests) or "(the failing tests are hidden; run_tests runs the visible suite)"
    return (
        "A feature was removed from this repository and the tests that need it fail. Restore it.\n"
        f"<task>\n{task.statement.strip()}\n</task>\n"
        f"Failing tests:\n{tests}\n"
        "Tools (one call per turn, on one line, e.g. " + render("list_dir", {"path": "."}).strip() + "):\n"
        f"{tools_text()}\n"
    )


class Env(Protocol):
    """What `play` needs from an environment: the task's prompt text, a tool executor, what the
    hint rules know about the task, and the verdict once the episode has ended."""

    instance_id: str
    hint_ctx: HintContext

    def prompt(self) -> str: ...

    def execute(self, call: ToolCall) -> Observation: ...

    def finish(self, ended: str) -> tuple[str, float, str, str]:
        """(patch, reward, status, reason); `ended` says how the episode ended."""
        ...


class TaskEnv:
    """A packaged task: its start state in a work tree under `workdir`, tools on it (`run_tests` in
    the sandbox) and the grader's verdict on the diff to the final tree."""

    def __init__(self, task: AgentTask, backend, workdir: Path, config: EpisodeConfig):
        self.task, self.backend, self.config, self.instance_id = task, backend, config, task.instance_id
        self.start = start_state(task.grade.snapshot, task.grade.deletion_patch, workdir / "start")
        self.work = workdir / "work"
        shutil.copytree(self.start, self.work, symlinks=True,
                        ignore=lambda d, names: [".git"] if Path(d) == self.start else [])
        self.ws = Workspace(self.work, task.grade, backend, max_observation=config.max_observation,
                            test_timeout_s=config.test_timeout_s)
        self.hint_ctx = HintContext(test_files=frozenset(t.split("::", 1)[0]
                                                         for t in task.grade.fail_to_pass + task.grade.pass_to_pass),
                                    max_action_chars=config.max_action_tokens, language=task.grade.language)

    def prompt(self) -> str:
        return prompt_text(self.task, self.ws.visible_failing())

    def execute(self, call: ToolCall) -> Observation:
        return self.ws.execute(call)

    def finish(self, ended: str) -> tuple[str, float, str, str]:
        return _grade(self.task, self.start, self.work, self.backend, ended, self.config)


def run_episode(task: AgentTask, policy: Policy, backend, *, config: EpisodeConfig = EpisodeConfig(),
                rollout: int = 0, seed: int = 0, workdir: Path | None = None,
                rules: dict[str, Rule] | None = None) -> Trajectory:
    """One episode (see the module docstring); `workdir` keeps its trees, else a temporary dir."""
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="featdel-episode-") as tmp:
            return run_episode(task, policy, backend, config=config, rollout=rollout, seed=seed,
                               workdir=Path(tmp), rules=rules)
    started = time.monotonic()
    traj = play(TaskEnv(task, backend, workdir, config), policy, config, rollout=rollout, seed=seed, rules=rules)
    return dataclasses.replace(traj, seconds=round(time.monotonic() - started, 3))


def play(env: Env, policy: Policy, config: EpisodeConfig = EpisodeConfig(), *, rollout: int = 0, seed: int = 0,
         rules: dict[str, Rule] | None = None) -> Trajectory:
    """The token loop over any `Env`: prompt, then per turn act, parse, execute, frame the
    observation, run the hint rules; then `env.finish`. Turn t samples with seed
    `seed * 1000003 + t`."""
    started = time.monotonic()
    codec = codec_of(policy)
    tokens = codec.encode(frame_prompt(codec, env.prompt()))
    prompt_len = len(tokens)
    mask = [0] * prompt_len
    turns: list[Turn] = []
    hints: list[Hint] = []
    ended = "turn_budget"
    for index in range(config.max_turns):
        allowance = min(config.max_action_tokens, config.max_tokens - len(tokens))
        if allowance < 1:
            ended = "token_budget"
            break
        ids, logprobs = _act(policy, codec, tokens, allowance, seed * 1_000_003 + index)
        action_start = len(tokens)
        tokens += ids
        mask += [1] * len(ids)
        text = codec.decode(ids)
        parsed = parse(text)
        obs = (Observation(text=f"error: {parsed.message}", ok=False) if isinstance(parsed, CallError)
               else env.execute(parsed))
        line_ended = bool(ids) and codec.is_stop(ids[-1])
        obs_ids = codec.encode(frame_observation(codec, obs.text, ids))
        turn = Turn(index=index, action_start=action_start, action_ids=ids, logprobs=logprobs, action_text=text,
                    call=None if isinstance(parsed, CallError) else {"name": parsed.name, "args": parsed.args},
                    error=str(parsed.kind) if isinstance(parsed, CallError) else None, observation=obs.text,
                    ok=obs.ok, touched=obs.touched, ran_tests=obs.ran_tests,
                    hit_cap=len(ids) >= config.max_action_tokens and not line_ended, obs_start=len(tokens),
                    obs_len=len(obs_ids))
        tokens += obs_ids
        mask += [0] * len(obs_ids)
        hints += hints_for(turn, turns, env.hint_ctx, rules)
        turns.append(turn)
        if obs.done:
            ended = "submitted"
            break
        if len(tokens) >= config.max_tokens:
            ended = "token_budget"
            break
    patch, reward, status, reason = env.finish(ended)
    return Trajectory(instance_id=env.instance_id, rollout=rollout, seed=seed, prompt_len=prompt_len,
                      tokens=tokens, mask=mask, turns=turns, hints=hints, ended=ended, patch=patch, reward=reward,
                      status=status, reason=reason, seconds=round(time.monotonic() - started, 3),
                      language=env.hint_ctx.language)


def _act(policy: Policy, codec: Codec, context: list[int], allowance: int, seed: int) -> tuple[list[int], list[float]]:
    """The policy's turn, cut at its first stop token and to the allowance; ids must be in the
    codec's vocabulary."""
    ids, logprobs = policy.act(list(context), max_tokens=allowance, seed=seed)
    ids, logprobs = [int(i) for i in ids][:allowance], [float(x) for x in logprobs][:allowance]
    if len(ids) != len(logprobs):
        raise ValueError(f"the policy gave {len(ids)} tokens but {len(logprobs)} log-probabilities")
    if any(not 0 <= i < codec.vocab for i in ids):
        raise ValueError(f"the policy gave a token id outside its vocabulary of {codec.vocab}")
    end = next((j + 1 for j, i in enumerate(ids) if codec.is_stop(i)), len(ids))
    return ids[:end], logprobs[:end]


def _grade(task: AgentTask, start: Path, work: Path, backend, ended: str,
           config: EpisodeConfig) -> tuple[str, float, str, str]:
    """(patch, reward, status, reason). A work tree that cannot be diffed is the learner's doing
    (`patch_failed`); the grader records any failure that follows from the patch as the patch's,
    so an exception out of `grade` means the start state itself fails: `broken`, never a crash."""
    try:
        patch = final_patch(start, work)
    except (OSError, subprocess.SubprocessError, UnicodeError) as exc:
        return "", 0.0, "patch_failed", f"could not diff the work tree: {exc}"
    if config.require_submit and ended != "submitted":
        return patch, 0.0, "not_submitted", f"the episode ended by {ended} without submit"
    try:
        result = grade(task.grade, patch, backend)
    except Exception:  # noqa: BLE001 - one episode's grading failure is a record, not a dead batch
        return patch, 0.0, "broken", traceback.format_exc(limit=3)[-600:]
    return patch, result.reward, str(result.status), result.reason


def final_patch(start: Path, work: Path) -> str:
    """The unified diff from the start state to a scrubbed copy of `work`, both hashed in a
    repository of featdel's own (`featdel.code.trees.diff_trees`): the start state's `.git` is not
    read, and no `.git` or `.gitattributes` in the work tree is obeyed."""
    with tempfile.TemporaryDirectory(prefix="featdel-final-") as tmp:
        final = Path(tmp) / "final"
        # no `.git` of any kind, at any depth: one deeper down would make its folder a submodule
        shutil.copytree(work, final, symlinks=True, ignore=lambda _dir, names: [n for n in names if n == ".git"])
        scrub(final)
        return diff_trees(start, final)


def rollouts(task: AgentTask, policy: Policy, backend, *, k: int, config: EpisodeConfig = EpisodeConfig(),
             seed: int = 0, workdir: Path | None = None, workers: int | None = None,
             rules: dict[str, Rule] | None = None) -> list[Trajectory]:
    """k episodes of `task` in parallel threads (rollout i has seed `seed + i`), in order. An
    episode that raises (the policy, the sandbox, the start state) is a `broken` trajectory with
    the traceback as its reason, and the other rollouts go on: a trainer leaves `broken` out."""
    if k < 1:
        raise ValueError(f"k={k} must be >= 1")

    def one(i: int) -> Trajectory:
        try:
            return run_episode(task, policy, backend, config=config, rollout=i, seed=seed + i,
                               workdir=None if workdir is None else workdir / f"rollout-{i}", rules=rules)
        except Exception:  # noqa: BLE001 - one rollout's failure is a record, not a dead group
            return Trajectory(instance_id=task.instance_id, rollout=i, seed=seed + i, prompt_len=0, tokens=[], mask=[],
                              turns=[], hints=[], ended="error", patch="", reward=0.0, status="broken",
                              reason=traceback.format_exc(limit=4)[-1500:], language=task.grade.language)

    with ThreadPoolExecutor(max_workers=workers or k, thread_name_prefix="rollout") as pool:
        return list(pool.map(one, range(k)))


def load_agent_tasks(run_dir: Path, workdir: Path, *, backend=None,
                     ids: Sequence[str] | None = None) -> dict[str, AgentTask | str]:
    """The packaged run's tasks with their statements, or why one cannot run here (no env)."""
    from featdel.core.shards import read_tasks
    from featdel.grading.evaluate import load_tasks

    statements = {row["instance_id"]: row["problem_statement"] or ""
                  for row in read_tasks(run_dir).select(["instance_id", "problem_statement"]).to_pylist()}
    out: dict[str, AgentTask | str] = {}
    for iid, task in load_tasks(run_dir, workdir, backend=backend).items():
        if ids is None or iid in ids:
            out[iid] = task if isinstance(task, str) else AgentTask(grade=task, statement=statements.get(iid, ""))
    return out

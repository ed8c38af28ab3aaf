"""A controlled environment in the agent's own tool protocol, cheap enough to learn in on CPU.

In: a seed (the task: three files holding distinct words, one of them named in the prompt) and
any `Policy`. Out: `Trajectory` records from the very token loop real tasks use
(`featdel.agent.episode.play`): the same parser, tool names, argument schemas, observation
framing and hint rules. The file tools are the real `Workspace` on a small tmpfs directory, so
their observations and errors are the real ones; `run_tests` runs the task's one check in
process and reports it as the real `run_tests` does. The reward is 1 when the episode was
submitted and answer.txt holds the named file's word, else 0. An episode takes about a
millisecond plus the policy's time, so a tiny byte model can learn here in minutes
(bench/targeted_rl.py, docs/targeted_rl.md).

A byte model from scratch cannot emit a 60-byte JSON call by chance, so the experiment starts
from a supervised warm-up on `BehaviourPrior`: plausible tool use, mostly wrong (random tools,
files and words, some malformed calls and unknown tools), the correct call only as often as any
other. `warmup_sequences` adds, for every hint the rules emit on the prior's turns, the context
with the hint inserted and a call that heeds it (a valid call; `run_tests` after a
`submit_untested` hint): the ability to read a hint in context, which the self-distillation
teacher presumes, is what a pretrained model brings and a model from scratch lacks.
"""

from __future__ import annotations

import difflib
import random
import tempfile
from dataclasses import dataclass
from pathlib import Path

from featdel.agent.episode import EpisodeConfig, play
from featdel.agent.hints import HintContext, Rule
from featdel.agent.policy import OBS_CLOSE, OBS_OPEN, decode, encode
from featdel.agent.protocol import CLOSE, OPEN, TOOLS, ToolCall, render
from featdel.agent.trajectory import Trajectory
from featdel.agent.workspace import Observation, Workspace
from featdel.grading.grade import GradeStatus

WORDS = ("red", "blue", "green", "gold", "pink", "gray")
FILES = ("a.txt", "b.txt", "c.txt")
ANSWER, TEST = "answer.txt", "test_answer.py"
TEST_ID = f"{TEST}::test_answer"
TOY_CONFIG = EpisodeConfig(max_turns=5, max_tokens=2048, max_action_tokens=120, max_observation=400,
                           require_submit=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class ToyTask:
    instance_id: str
    words: dict[str, str]  # file -> the word it holds (distinct: a wrong file gives a wrong answer)
    target: str  # the file the prompt names

    @property
    def word(self) -> str:
        return self.words[self.target]


def make_task(seed: int) -> ToyTask:
    rng = random.Random(seed)
    return ToyTask(instance_id=f"toy-{seed}", words=dict(zip(FILES, rng.sample(WORDS, len(FILES)), strict=True)),
                   target=rng.choice(FILES))


def toy_prompt(task: ToyTask) -> str:
    return (f"Write the word in {task.target} to {ANSWER}, then submit.\n"
            f"Files: {' '.join((*FILES, TEST))}\nTools: {' '.join(TOOLS)}\n")


class ToyEnv:
    """One episode's state of a `ToyTask` (an `episode.Env`); `finish` removes its directory."""

    def __init__(self, task: ToyTask, config: EpisodeConfig = TOY_CONFIG):
        self.task, self.config, self.instance_id = task, config, task.instance_id
        shm = Path("/dev/shm")
        self._tmp = tempfile.TemporaryDirectory(prefix="featdel-toy-", dir=shm if shm.is_dir() else None)
        self.root = Path(self._tmp.name)
        self.start = {f: w + "\n" for f, w in task.words.items()}
        self.start[TEST] = (f"def test_answer():\n    assert open({ANSWER!r}).read().strip() == "
                            f"open({task.target!r}).read().strip()\n")
        for rel, text in self.start.items():
            (self.root / rel).write_text(text)
        self.ws = Workspace(self.root, None, None, max_observation=config.max_observation)
        self.hint_ctx = HintContext(test_files=frozenset({TEST}), max_action_chars=config.max_action_tokens)

    def prompt(self) -> str:
        return toy_prompt(self.task)

    def execute(self, call: ToolCall) -> Observation:
        if call.name != "run_tests":
            return self.ws.execute(call)
        passed, why = self._check()
        outcomes = {t: ("passed" if passed else "failed") if t == TEST_ID else "not collected"
                    for t in call.args["tests"] or [TEST_ID]}
        n = sum(o == "passed" for o in outcomes.values())
        lines = [f"{n} of {len(outcomes)} tests passed", *(f"{o}: {t}" for t, o in outcomes.items())]
        if n < len(outcomes):
            lines += ["--- output (tail) ---", why]
        return Observation(text=self.ws.clip("\n".join(lines)), ran_tests=True)

    def _check(self) -> tuple[bool, str]:
        answer = self.root / ANSWER
        if not answer.is_file():
            return False, f"FileNotFoundError: {ANSWER}"
        got = answer.read_bytes().decode("utf-8", errors="replace").strip()
        return got == self.task.word, f"AssertionError: {got[:40]!r} != the word in {self.task.target}"

    def finish(self, ended: str) -> tuple[str, float, str, str]:
        try:
            passed, why = self._check()
            patch = self._patch()
        finally:
            self._tmp.cleanup()
        if self.config.require_submit and ended != "submitted":
            return patch, 0.0, "not_submitted", f"the episode ended by {ended} without submit"
        if passed:
            return patch, 1.0, str(GradeStatus.RESOLVED), ""
        return patch, 0.0, str(GradeStatus.UNRESOLVED), why

    def _patch(self) -> str:
        """A unified diff of the files the episode changed (for reading, not for grading)."""
        now = {str(p.relative_to(self.root)): p.read_bytes().decode("utf-8", errors="replace")
               for p in sorted(self.root.rglob("*")) if p.is_file()}
        out = []
        for rel in sorted(set(now) | set(self.start)):
            a, b = self.start.get(rel), now.get(rel)
            if a != b:
                out += difflib.unified_diff((a or "").splitlines(True), (b or "").splitlines(True),
                                            "/dev/null" if a is None else f"a/{rel}", "/dev/null" if b is None else f"b/{rel}")
        return "".join(out)


def toy_episode(task: ToyTask, policy, *, config: EpisodeConfig = TOY_CONFIG, rollout: int = 0, seed: int = 0,
                rules: dict[str, Rule] | None = None) -> Trajectory:
    return play(ToyEnv(task, config), policy, config, rollout=rollout, seed=seed, rules=rules)


UNKNOWN = ("read", "cat", "open_file", "write", "save", "done")
VALID = (("read_file", 0.35), ("write_file", 0.35), ("submit", 0.15), ("run_tests", 0.05), ("list_dir", 0.05),
         ("apply_patch", 0.05))


class BehaviourPrior:
    """Plausible tool use, mostly wrong: each turn a valid call (tool, file and word drawn at
    random; the word written is the last one read 60% of the time), an unknown tool or a
    malformed call. It never looks at which file the prompt names."""

    def __init__(self, *, malformed: float = 0.1, unknown: float = 0.05):
        self.malformed, self.unknown = malformed, unknown

    def act(self, context, *, max_tokens, seed):
        rng = random.Random(seed)
        roll, text = rng.random(), decode(context)
        if roll < self.malformed:
            line = corrupt(self.valid_line(text, rng), rng)
        elif roll < self.malformed + self.unknown:
            line = render(rng.choice(UNKNOWN), {"path": rng.choice(FILES)})
        else:
            line = self.valid_line(text, rng)
        ids = encode(line)[:max_tokens]
        return ids, [0.0] * len(ids)

    def valid_line(self, text: str, rng: random.Random, tool: str | None = None) -> str:
        names, weights = zip(*VALID, strict=True)
        tool = tool or rng.choices(names, weights)[0]
        if tool == "read_file":
            return render(tool, {"path": rng.choice((*FILES, ANSWER))})
        if tool == "write_file":
            seen = [o for o in (part.split(OBS_CLOSE)[0].strip() for part in text.split(OBS_OPEN)[1:]) if o in WORDS]
            word = seen[-1] if seen and rng.random() < 0.6 else rng.choice(WORDS)
            path = ANSWER if rng.random() < 0.7 else rng.choice((*FILES, TEST))
            return render(tool, {"path": path, "content": word})
        if tool == "list_dir":
            return render(tool, {"path": "."})
        if tool == "apply_patch":
            return render(tool, {"patch": f"--- a/{rng.choice(FILES)}\n+++ b/{ANSWER}\n"})
        return render(tool)


def corrupt(line: str, rng: random.Random) -> str:
    """A call broken the way an untrained model breaks one: cut short, a quote or brace lost,
    single quotes, or no tags."""
    body = line.rstrip("\n")
    how = rng.randrange(4)
    if how == 0:
        body = body[: rng.randrange(len(OPEN) + 2, len(body) - 8)]
    elif how == 1:
        i = rng.choice([i for i, c in enumerate(body) if c in '"{}'])
        body = body[:i] + body[i + 1:]
    elif how == 2:
        body = body.replace('"', "'")
    else:
        body = body[len(OPEN):-len(CLOSE)]
    return body + "\n"


def heed(rule: str, text: str, failed: str, prior: BehaviourPrior, rng: random.Random) -> str:
    """A call that follows a hint of `rule` given after context `text` (`failed`: the hinted action)."""
    if rule == "submit_untested":
        return render("run_tests")
    if rule == "test_edit":
        return prior.valid_line(text, rng, "write_file").replace(f'"path": "{TEST}"', f'"path": "{ANSWER}"')
    for _ in range(8):
        line = prior.valid_line(text, rng)
        if line != failed:
            return line
    return render("list_dir")


def warmup_sequences(n: int, *, seed: int = 0, prior: BehaviourPrior | None = None,
                     config: EpisodeConfig = TOY_CONFIG) -> list[tuple[list[int], list[int]]]:
    """(tokens, mask) to imitate: `n` prior episodes on random tasks (mask on every action), and
    per hint, its context with the hint inserted and a call heeding it (mask on that call)."""
    prior = prior or BehaviourPrior()
    rng = random.Random(seed)
    out: list[tuple[list[int], list[int]]] = []
    for i in range(n):
        traj = toy_episode(make_task(rng.randrange(1 << 30)), prior, config=config, seed=seed * 100_003 + i)
        out.append((traj.tokens, traj.mask))
        turns = {t.index: t for t in traj.turns}
        for hint in traj.hints:
            turn = turns[hint.turn]
            context = traj.tokens[: hint.at] + hint.ids()
            action = encode(heed(hint.rule, decode(traj.tokens[: hint.at]), turn.action_text, prior, rng))
            out.append((context + action, [0] * len(context) + [1] * len(action)))
    return out

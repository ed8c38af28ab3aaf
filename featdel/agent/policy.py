"""Policies: what produces a turn's tokens from the episode's tokens so far.

In: the context token ids, how many tokens the turn may use, and a seed. Out: the sampled ids and
the log-probability each was sampled with. The environment decodes the ids to text only to parse
the call; the ids themselves are what the trajectory keeps. The vocabulary is bytes (token id ==
byte value, as `featdel.trainer.model`), so the tokenizer here is two lines and needs no torch.

- `featdel.trainer.policy.TransformerPolicy` (torch): a trained model as a policy, in the layer
  that holds the models.
- `ScriptedPolicy`: fixed lines, one per turn, for tests and for checking an environment end to
  end. It reads how many observations its context holds to know which line is next, so one
  instance serves any number of episodes at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from featdel.agent.protocol import STOP

OBS_OPEN, OBS_CLOSE = "<obs>\n", "\n</obs>\n"


def encode(text: str) -> list[int]:
    """Bytes of `text`; a lone surrogate (JSON can carry one into a path) becomes "?"."""
    return list(text.encode("utf-8", errors="replace"))


def decode(ids: Sequence[int]) -> str:
    return bytes(int(i) & 0xFF for i in ids).decode("utf-8", errors="replace")


STOP_ID = encode(STOP)[0]


class Codec(Protocol):
    """Text <-> token ids for an episode: what the prompt, observations and hints are encoded
    with and what a turn's ids are decoded with. A turn ends at its first stop id."""

    vocab: int

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def is_stop(self, token_id: int) -> bool: ...


class ByteCodec:
    """Bytes: the `featdel.trainer` models' vocabulary, and the default of every policy."""

    vocab = 256

    def encode(self, text: str) -> list[int]:
        return encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return decode(ids)

    def is_stop(self, token_id: int) -> bool:
        return token_id == STOP_ID


BYTES = ByteCodec()


def frame_prompt(codec: Codec, text: str) -> str:
    """The episode's first text as the policy reads it: the codec's `frame_prompt` (a chat
    template's system and user messages and the assistant's header), else the text itself."""
    frame = getattr(codec, "frame_prompt", None)
    return frame(text) if frame else text


def frame_observation(codec: Codec, text: str, action_ids: Sequence[int]) -> str:
    """What follows a turn's action: the codec's `frame_observation` (a chat codec closes the
    assistant's message and sends the result as the next user message), else `<obs>` lines; an
    action cut off before its stop token still leaves the observation on a line of its own."""
    frame = getattr(codec, "frame_observation", None)
    if frame:
        return frame(text, action_ids)
    line_ended = bool(action_ids) and codec.is_stop(action_ids[-1])
    return ("" if line_ended else "\n") + OBS_OPEN + text + OBS_CLOSE


def hint_insertion(codec: Codec, tokens: Sequence[int], action_start: int, hints) -> tuple[list[int], int]:
    """(hint ids, where they go) for the teacher's context of a turn: the codec's `hint_insertion`
    (a chat codec makes the hints a user message before the assistant's header), else each
    hint's `<hint>` line just before the action."""
    place = getattr(codec, "hint_insertion", None)
    if place:
        return place(tokens, action_start, [h.text for h in hints])
    return [i for h in hints for i in h.ids(codec.encode)], action_start


def codec_of(policy) -> Codec:
    """A policy's codec (`policy.codec`), bytes when it has none."""
    return getattr(policy, "codec", None) or BYTES


class Policy(Protocol):
    def act(self, context: Sequence[int], *, max_tokens: int, seed: int) -> tuple[list[int], list[float]]:
        """Up to `max_tokens` new token ids after `context`, and their log-probabilities."""
        ...


class ScriptedPolicy:
    """Plays `lines` in order (line i after i observations); past the end it submits."""

    def __init__(self, lines: Sequence[str]):
        self.lines = list(lines)

    def act(self, context, *, max_tokens, seed):
        step = decode(context).count(OBS_CLOSE)
        line = self.lines[step] if step < len(self.lines) else '<tool>{"name": "submit", "args": {}}</tool>'
        ids = encode(line if line.endswith(STOP) else line + STOP)[:max_tokens]
        return ids, [0.0] * len(ids)

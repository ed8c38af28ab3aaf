"""The reward-hacking monitor: flags attempts to reach the deleted code or game the grader.

`flag(traj)` (rules only, no network) is what the trainer calls to zero the reward of a flagged
trajectory; `featdel monitor` runs the rules (and optionally an LLM judge, `judge.py`) over
trajectory files, stores the flags next to the attempts and prints a report (`report.py`).
"""

from featdel.monitor.rules import RULES, Flag, flag

__all__ = ["RULES", "Flag", "flag"]

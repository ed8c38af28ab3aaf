"""Named presets of `featdel train`: the model, the rollout shape and the step size in one word.

A preset fixes everything a run's behaviour depends on except the tasks, the seed and where it
writes, so the command line stays short (a few flags plus `--preset`) and two runs with one
preset are comparable. `debug` trains in seconds on CPU in CI; `tiny` is for a CPU afternoon;
`small` and up want GPUs (one rank each under `torchrun`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class RLPreset:
    model: str  # a featdel.trainer.model preset (ignored with --model PATH)
    steps: int
    tasks_per_step: int  # distinct tasks drawn by the curriculum sampler per step (over all ranks)
    k: int  # rollouts per task (the GRPO group)
    max_turns: int
    max_tokens: int  # a whole episode
    max_action_tokens: int  # one turn of the policy
    max_observation: int = 2000  # characters of one observation
    temperature: float = 1.0
    lr: float = 0.02  # Muon
    adamw_lr: float = 3e-3
    save_every: int = 50
    test_timeout_s: float = 120.0
    teacher: str = "live"

    def __post_init__(self):
        for name in ("steps", "tasks_per_step", "k", "max_turns", "max_tokens", "max_action_tokens", "save_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be >= 1")


PRESETS = {
    "debug": RLPreset(model="debug", steps=2, tasks_per_step=2, k=2, max_turns=2, max_tokens=8192,
                      max_action_tokens=32, save_every=1, test_timeout_s=60.0),
    # a pretrained model's CI run (--model NAME on CPU): one task, two rollouts, two short turns
    "smoke": RLPreset(model="debug", steps=2, tasks_per_step=1, k=2, max_turns=2, max_tokens=8192,
                      max_action_tokens=24, save_every=1, test_timeout_s=60.0),
    "tiny": RLPreset(model="tiny", steps=200, tasks_per_step=2, k=4, max_turns=8, max_tokens=16384,
                     max_action_tokens=256, save_every=20),
    "small": RLPreset(model="small", steps=1000, tasks_per_step=8, k=8, max_turns=30, max_tokens=65536,
                      max_action_tokens=1024, lr=0.01, adamw_lr=1e-3, save_every=50),
    "medium": RLPreset(model="medium", steps=2000, tasks_per_step=16, k=16, max_turns=50, max_tokens=131072,
                       max_action_tokens=2048, lr=0.005, adamw_lr=5e-4, save_every=50),
}


def preset(name: str) -> RLPreset:
    if name not in PRESETS:
        raise ValueError(f"preset {name!r} is unknown; use one of {', '.join(PRESETS)}")
    return PRESETS[name]

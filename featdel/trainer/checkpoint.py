"""Save and load model + ShardedMuon state with `torch.distributed.checkpoint` (DCP).

In: a (possibly FSDP2-sharded) model, its optimizer, a directory and the number of steps done.
Out: a DCP checkpoint directory; `load_checkpoint` fills model and optimizer in place and
returns the step to continue from.

The state dicts come from `torch.distributed.checkpoint.state_dict`, keyed by parameter name
and holding DTensors, so a checkpoint written on one layout (FSDP, HSDP, another rank count)
loads on another: DCP reshards on load. Optimizer state is created before loading (DCP loads
into existing tensors), which `get_state_dict` does with a zero-gradient, zero-lr step.
"""

from __future__ import annotations

import warnings

# DCP warns that it saves "in a single process" whenever no process group exists: that is the
# single-process run's normal case, not news.
_SINGLE = "torch.distributed is disabled, unavailable or uninitialized"


def save_checkpoint(path, model, optimizer, step: int) -> None:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SINGLE)
        dcp.save({"model": model_sd, "optim": optim_sd, "step": torch.tensor(step)}, checkpoint_id=str(path))


def load_checkpoint(path, model, optimizer) -> int:
    import torch
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "step": torch.tensor(0)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SINGLE)
        dcp.load(state, checkpoint_id=str(path))
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["step"])


def load_model(path, model) -> None:
    """Only the model's weights from a checkpoint (for inference: no optimizer needed)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

    state = {"model": get_model_state_dict(model)}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SINGLE)
        dcp.load(state, checkpoint_id=str(path))
    set_model_state_dict(model, state["model"])

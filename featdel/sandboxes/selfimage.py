"""featdel's own Docker image (the top-level Dockerfile), built offline from the local base.

In: the repository root (Dockerfile, pyproject) and a base image name. Out: the image name.
A host-side `pip wheel` makes a wheelhouse of featdel and its dependencies; the build context is
a temporary folder holding only that wheelhouse and the Dockerfile, so nothing else of the
checkout (a .venv, runs) is sent to the engine and the build needs no network.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from featdel.core.errors import SandboxError
from featdel.sandboxes import images


def repo_root() -> Path:
    root = Path(__file__).resolve().parents[2]  # featdel/sandboxes/selfimage.py -> the checkout
    if not (root / "Dockerfile").is_file() or not (root / "pyproject.toml").is_file():
        raise SandboxError(f"no Dockerfile next to pyproject.toml in {root}: build from a checkout")
    return root


def build_featdel_image(*, base: str = images.BASE_IMAGE, tag: str = "featdel:latest",
                        root: Path | None = None) -> str:
    """Wheelhouse on the host, then `docker build --build-arg BASE=base` of the Dockerfile."""
    root = root or repo_root()
    images.build_base_image(base)
    with tempfile.TemporaryDirectory(prefix="featdel-image-", dir="/var/tmp") as tmp:
        ctx = Path(tmp)
        wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", str(root), "-w", str(ctx / "wheels")],
                               capture_output=True, text=True, timeout=1800)
        if wheel.returncode != 0:
            raise SandboxError(f"pip wheel failed: {wheel.stderr.strip()[-300:]}")
        shutil.copy(root / "Dockerfile", ctx / "Dockerfile")
        import docker

        try:
            images.client().images.build(path=str(ctx), tag=tag, buildargs={"BASE": base}, rm=True,
                                         forcerm=True, pull=False)
        except docker.errors.BuildError as exc:
            log = "".join(str(c.get("stream", "")) for c in exc.build_log)
            raise SandboxError(f"docker build failed: {exc.msg}: {log.strip()[-300:]}") from exc
    return tag

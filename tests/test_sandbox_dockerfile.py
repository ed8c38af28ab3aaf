"""Invariant: the top-level Dockerfile builds with no registry and no network from the local
base image (`ARG BASE`), and `featdel --help` runs in the result as a non-root user."""

from __future__ import annotations

import pytest
from conftest_sandbox import docker_base_image

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_dockerfile_builds_offline_and_featdel_runs_in_it():
    from featdel.sandboxes.images import client
    from featdel.sandboxes.selfimage import build_featdel_image

    base = docker_base_image()
    tag = build_featdel_image(base=base, tag="featdel:test")
    out = client().containers.run(tag, ["--help"], network_mode="none", remove=True)
    assert b"Usage" in out and b"featdel" in out
    uid = client().containers.run(tag, entrypoint=["id", "-u"], network_mode="none", remove=True)
    assert uid.strip() != b"0"

"""Packaged rows are clean: `source` never holds a local path (a local checkout becomes its
remote's URL or `local:NAME`); every env row carries its lock and the source's licence; the
env rows have exactly the columns the package.py docstring promises; `env_id` is the
content-addressed id of the lock; `created_at` is when the task was verified, so packaging
again rewrites nothing; and `instance_id` stays unique across the hidden-tests knob.

Cheap on purpose: the run directory is written record by record (a snapshot, a mined record, one
deletion and its verified verdict), so no environment is built; the lock's real origin is pinned
in test_recipe_lock.py.
"""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from featdel.code import trees
from featdel.core.records import (
    Deletion,
    Recipe,
    RepoRecord,
    RepoStatus,
    Verdict,
    VerdictStatus,
)
from featdel.core.rundir import RunDir
from featdel.core.shards import ENV_SCHEMA, read_envs, read_tasks
from featdel.env import envs
from featdel.pipeline.package import license_of, package
from tests.conftest import TINY_LIB, make_repo

LOCK = ["coverage==7.6.1", "iniconfig==2.0.0", "pip==24.0", "pytest==8.3.3"]
VERIFIED_AT = "2026-11-30T12:00:00+00:00"
WHISPER = TINY_LIB["tinylib/text.py"].replace("    return s.lower()", "    raise NotImplementedError")


def _run_dir(tmp_path: Path, repo: Path) -> Path:
    """A run directory holding one verified body deletion of `whisper`."""
    run_dir = tmp_path / "run"
    rd = RunDir(run_dir)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
    trees.write_snapshot(repo, commit, rd.snapshot("tinylib"))
    recipe = Recipe(python="3.11.7", install=[["python", "-m", "pip", "install", "-q", "-e", "."]],
                    test_cmd=["python", "-m", "pytest", "-q"], package_dirs=["tinylib"], lock=LOCK)
    rd.add_repo(RepoRecord(source=str(repo), name="tinylib", commit=commit, recipe=recipe,
                           env_dir=str(tmp_path / "cache" / "envs" / "tinylib-x"), status=RepoStatus.MINED))
    files = {"tinylib/text.py": WHISPER}
    deletion = Deletion(deletion_id="tinylib__body__0123abcd", repo="tinylib", strategy="body",
                        target="tinylib/text.py::whisper", deleted_symbols=["tinylib/text.py::whisper"],
                        files=files, removed=["    return s.lower()\n"])
    rd.add_deletion(deletion)
    deletion_patch, patch = trees.diff(rd.snapshot("tinylib"), files)
    start = trees.start_state(rd.snapshot("tinylib"), deletion_patch, tmp_path / "start")
    rd.add_verdict(Verdict(deletion_id=deletion.deletion_id, repo="tinylib", strategy="body", target=deletion.target,
                           status=VerdictStatus.VERIFIED, stage="done",
                           FAIL_TO_PASS=["tests/test_text.py::test_whisper"],
                           PASS_TO_PASS=["tests/test_text.py::test_shout"], deletion_patch=deletion_patch, patch=patch,
                           problem_statement="Implement whisper.", start_sha256=trees.tree_digest(start),
                           verified_at=VERIFIED_AT))
    return run_dir


@pytest.fixture
def repo(tmp_path) -> Path:
    files = {**TINY_LIB, "pyproject.toml": TINY_LIB["pyproject.toml"].replace('version = "0.1"\n',
                                                                              'version = "0.1"\nlicense = {text = "MIT"}\n')}
    return make_repo(tmp_path / "checkouts" / "tinylib", files)


def test_env_rows_have_the_promised_columns_lock_licence_and_no_local_path(tmp_path, repo):
    run_dir = _run_dir(tmp_path, repo)
    assert package(run_dir) == (1, 1)
    [env] = read_envs(run_dir).to_pylist()
    assert ENV_SCHEMA.names == ["env_id", "repo", "source", "base_commit", "python", "install", "test_cmd",
                                "package_dirs", "snapshot", "lock", "license", "language", "install_files", "schema_version"]
    assert env["lock"] == LOCK and env["license"] == "MIT" and env["language"] == "python"
    assert env["install_files"] == []  # Python's lock is `lock`
    [record] = RunDir(run_dir).mined()
    assert env["env_id"] == envs.env_id("tinylib", record.commit, record.recipe)
    assert env["env_id"].startswith("tinylib-") and len(env["env_id"]) == len("tinylib-") + 16
    [task] = read_tasks(run_dir).to_pylist()
    assert task["env_id"] == env["env_id"]
    # No column of any row holds a path of this machine; the checkout has no remote: local:NAME.
    assert env["source"] == task["source"] == "local:tinylib"
    for row in (env, task):
        assert not [k for k, v in row.items() if isinstance(v, str) and str(tmp_path) in v]


def test_a_checkout_with_a_remote_is_packaged_as_its_url_without_credentials(tmp_path, repo):
    subprocess.run(["git", "remote", "add", "origin", "https://user:secret@example.org/team/tinylib.git"],
                   cwd=repo, check=True)
    run_dir = _run_dir(tmp_path, repo)
    package(run_dir)
    assert read_envs(run_dir).to_pylist()[0]["source"] == "https://example.org/team/tinylib.git"
    assert read_tasks(run_dir).to_pylist()[0]["source"] == "https://example.org/team/tinylib.git"


def test_created_at_is_when_verified_and_hidden_variants_have_their_own_ids(tmp_path, repo):
    run_dir = _run_dir(tmp_path, repo)
    package(run_dir)
    first = read_tasks(run_dir).to_pylist()
    package(run_dir)
    again = read_tasks(run_dir).to_pylist()
    assert first == again  # packaging again rewrites no row
    assert first[0]["created_at"].isoformat() == VERIFIED_AT
    visible = first[0]["instance_id"]
    hidden_run = tmp_path / "hidden"
    import shutil

    shutil.copytree(run_dir, hidden_run)
    package(hidden_run, hide_tests=True)
    [hidden] = read_tasks(hidden_run).to_pylist()
    assert hidden["instance_id"] == f"{visible}__hidden" != visible
    assert hidden["difficulty"]["tests_visible"] is False


def _snapshot(path: Path, files: dict[str, str]) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return path


APACHE = "                                 Apache License\n                           Version 2.0, January 2004\n"
MIT_TEXT = "Copyright (c) 2020 X\n\nPermission is hereby granted, free of charge, to any person obtaining a copy\n"


@pytest.mark.parametrize("files, expected", [
    ({"PKG-INFO": "Metadata-Version: 2.4\nName: a\nLicense-Expression: BSD-3-Clause\n\nbody"}, "BSD-3-Clause"),
    ({"PKG-INFO": "Metadata-Version: 2.1\nName: a\nLicense: Copyright (c) 2021 someone\n"
                  "Classifier: License :: OSI Approved :: MIT License\n"}, "MIT"),
    ({"setup.cfg": "[metadata]\nname = a\nlicense = Apache 2.0\n"}, "Apache-2.0"),
    ({"LICENSE.txt": APACHE}, "Apache-2.0"),
    ({"LICENCE": MIT_TEXT}, "MIT"),
    ({"README": "no licence here"}, "unknown"),
])
def test_licence_comes_from_metadata_then_the_licence_file(tmp_path, files, expected):
    assert license_of(_snapshot(tmp_path / "s.tar.gz", files)) == expected

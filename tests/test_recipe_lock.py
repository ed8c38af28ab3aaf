"""Environments are locked: after the install, the recipe holds every distribution in the venv
as `NAME==VERSION` (the repo itself left out) and the exact interpreter version; the env id is
content-addressed from repo, commit, python and lock, so the same env built under two separate
caches (two machines) gets the same id; `cache_root()/envs/<env_id>` finds the env, as
`featdel evaluate` looks it up; `Recipe.key()` (the build directory's name) ignores the lock;
an env built before locks existed is locked the next time it is used; and the install tools
(pip, setuptools, wheel) leave the venv unless the repository's own files import them.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from pathlib import Path

import pytest

from featdel.env import envs
from featdel.env.recipe import detect
from featdel.env.sources import checkout, resolve
from tests.conftest import make_repo

LIB = {
    "pyproject.toml": ('[project]\nname = "locklib"\nversion = "0.1"\n'
                       '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'),
    "locklib/__init__.py": "def one():\n    return 1\n",
    "tests/test_one.py": "from locklib import one\n\n\ndef test_one():\n    assert one() == 1\n",
}


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory, featdel_cache):
    """The same repo@commit@recipe built under two empty caches, as on two machines: one that
    installs with uv (the default) and one whose installs all go through pip."""
    repo = make_repo(tmp_path_factory.mktemp("lock") / "locklib", LIB)
    pinned = resolve(str(repo))
    tree = tmp_path_factory.mktemp("tree") / "src"
    checkout(pinned, tree)
    recipe = detect(tree)
    built = []
    with pytest.MonkeyPatch.context() as mp:
        for machine in ("a", "b"):
            mp.setenv("FEATDEL_CACHE", str(tmp_path_factory.mktemp(f"cache-{machine}")))
            mp.setenv("FEATDEL_INSTALLER", "uv" if machine == "a" else "pip")
            env = envs.build(pinned, recipe)
            built.append((env, envs.env_id(pinned.name, pinned.commit, env.recipe)))
    return pinned, recipe, built


def test_the_lock_lists_every_installed_distribution_but_the_repo(two_builds):
    _, recipe, [(env, _), _] = two_builds
    lock = env.recipe.lock
    assert recipe.lock == [] and lock, "detect() asks; the build locks"
    names = [line.split("==")[0].lower() for line in lock]
    assert all("==" in line for line in lock)
    assert {"pytest", "coverage"} <= set(names)
    assert "locklib" not in names
    # The install tools left once the install was done (featdel.env.tools): nothing imports them.
    assert not {"pip", "setuptools", "wheel"} & set(names)
    site = next(env.venv.glob("lib/python*/site-packages"))
    assert not [p.name for p in site.iterdir() if p.name.startswith(("pip", "setuptools", "pkg_resources", "wheel",
                                                                     "_distutils_hack", "distutils-"))]
    assert lock == sorted(lock, key=str.lower)
    assert env.recipe.python == platform.python_version()
    # The lock is in the marker the env is loaded from.
    assert envs.load(env.root).recipe.lock == lock


def test_two_caches_agree_on_the_env_id_and_each_finds_its_env_by_it(two_builds, tmp_path):
    pinned, recipe, [(a, id_a), (b, id_b)] = two_builds
    assert a.root != b.root and a.recipe.lock == b.recipe.lock
    assert id_a == id_b and id_a.startswith(f"{pinned.name}-")
    for env in (a, b):
        link = env.root.parent / id_a  # cache_root()/"envs"/env_id on that machine
        assert link.is_symlink() and envs.load(link).root == env.root
    # The key names the build directory and does not depend on the lock.
    assert a.recipe.key() == recipe.key() and a.root.name.endswith(recipe.key())
    other = dataclasses.replace(a.recipe, lock=[*a.recipe.lock, "extra==1.0"])
    assert envs.env_id(pinned.name, pinned.commit, other) != id_a


def test_uv_and_pip_install_the_same_environment_and_uv_compiles_its_bytecode(two_builds):
    """uv is the installer by default; an env it builds has the lock pip's would (above: the
    same env id), and its installed modules are byte-compiled as pip's are, so no sandboxed run
    (which writes no bytecode) compiles pytest again."""
    _, _, [(by_uv, _), (by_pip, _)] = two_builds
    uv_log, pip_log = [(env.root / "build.log").read_text() for env in (by_uv, by_pip)]
    assert "uv pip install" in uv_log and "# uv failed" not in uv_log
    assert "uv pip install" not in pip_log and " -m pip " in pip_log
    for env in (by_uv, by_pip):
        site = next(env.venv.glob("lib/python*/site-packages"))
        assert list((site / "_pytest" / "__pycache__").glob("*.pyc")), env.root


def test_a_step_uv_refuses_is_done_by_pip(tmp_path, featdel_cache):
    """A recipe step that uv will not run (here a pip-only option a recipe override may carry)
    is run again by pip: the env builds, and the log says so."""
    pinned = resolve(str(make_repo(tmp_path / "locklib", LIB)))
    tree = tmp_path / "src"
    checkout(pinned, tree)
    recipe = detect(tree)
    install = [[*argv[:4], "--progress-bar", "off", *argv[4:]] if "-e" in argv else argv for argv in recipe.install]
    env = envs.build(pinned, dataclasses.replace(recipe, install=install))
    log = (env.root / "build.log").read_text()
    assert log.count("# uv failed: the same step with pip") == 1
    assert {"pytest", "coverage"} <= {line.split("==")[0].lower() for line in env.recipe.lock}
    assert envs.load(env.root) is not None


def test_an_env_built_before_locks_is_locked_when_next_used(two_builds, monkeypatch):
    pinned, recipe, [(env, env_id), _] = two_builds
    monkeypatch.setenv("FEATDEL_CACHE", str(env.root.parent.parent))
    marker = env.root / "ready.json"
    old = json.loads(marker.read_text())
    old["recipe"].pop("lock")
    marker.write_text(json.dumps({"recipe": old["recipe"]}))
    (env.root.parent / env_id).unlink()
    assert envs.load(env.root).recipe.lock == []
    relocked = envs.build(pinned, recipe)
    assert relocked.root == env.root and relocked.recipe.lock == env.recipe.lock
    assert envs.load(Path(env.root.parent / env_id)).recipe.lock == env.recipe.lock


def test_a_repo_whose_tests_import_pkg_resources_keeps_setuptools(tmp_path, featdel_cache):
    files = {**LIB, "tests/test_one.py": "import pkg_resources\n" + LIB["tests/test_one.py"]}
    pinned = resolve(str(make_repo(tmp_path / "keeplib", files)))
    tree = tmp_path / "src"
    checkout(pinned, tree)
    env = envs.build(pinned, detect(tree))
    names = {line.split("==")[0].lower() for line in env.recipe.lock}
    assert "setuptools" in names and "pip" not in names
    from featdel.env import tools

    assert tools.locked(env.recipe.lock) == {"setuptools"}


def test_strip_removes_only_the_tools_a_venv_holds(tmp_path):
    """A venv made without pip holds none of the tools: nothing to uninstall, and no pip is asked
    to (a check that counted every tool as present ran `pip uninstall` in a venv with no pip)."""
    import subprocess
    import sys

    from featdel.env import tools

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    assert tools.strip(venv, keep=set()) == []
    fake = tools.site_packages(venv)[0] / "wheel-0.0.dist-info"
    fake.mkdir()
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: wheel\nVersion: 0.0\n")
    (fake / "RECORD").write_text("wheel-0.0.dist-info/METADATA,,\nwheel-0.0.dist-info/RECORD,,\n")
    assert tools.strip(venv, keep={"wheel"}) == []
    assert tools.strip(venv, keep=set()) == ["wheel"] and not fake.exists()

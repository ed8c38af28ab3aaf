"""No host-side git obeys a `.git` or `.gitattributes` that a learner's tree holds, and neither
outlives a test run.

Pins: test code the learner wrote, running in the sandbox through the workspace's `run_tests`,
plants a `.git` (filter driver, long-running filter, core.fsmonitor, core.hooksPath with hooks,
diff.external, textconv) and `.gitattributes` (`* filter=x diff=x`); the run leaves neither
behind, and neither `apply_patch` nor the episode's final diff runs anything, as root and as a
non-root featdel user, with and without `safe.directory = *` in the global config, and with the
sweep switched off (the git calls alone hold). Each scenario that switches a defence off checks
that plain git in the same tree does run the planted program, so the trap is armed. Below that:
`featdel.code.hostgit`'s apply and diff ignore a planted repository, the caller's GIT_* variables and
a global config's drivers; `commit_tree` never runs what an sdist's `.git` carries; patches apply
and diff byte for byte whatever attributes a tree has; the sweep never follows a link, puts back
a `.gitattributes` that was there before the run and removes what a non-root user can only
remove after opening it up.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from featdel.agent.episode import final_patch
from featdel.agent.protocol import ToolCall
from featdel.agent.workspace import Workspace
from featdel.code import trees
from featdel.code.git import commit_tree
from tests.conftest import make_repo, mine_tiny

REPO_ROOT = Path(__file__).resolve().parents[1]
OTHER_UID = 54321  # the non-root featdel user when the tests run as root
LIB = {
    "pyproject.toml": (
        '[project]\nname = "plantlib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "plantlib/__init__.py": "from plantlib.text import shout, whisper\n",
    "plantlib/text.py": "def shout(s):\n    return s.upper() + '!'\n\n\ndef whisper(s):\n    return s.lower()\n",
    "tests/test_text.py": (
        "from plantlib import shout, whisper\n\n\n"
        "def test_shout():\n    assert shout('hi') == 'HI!'\n\n\n"
        "def test_shout_empty():\n    assert shout('') == '!'\n\n\n"
        "def test_whisper():\n    assert whisper('HI') == 'hi'\n\n\n"
        "def test_whisper_empty():\n    assert whisper('') == ''\n"
    ),
}
STUBBED = "def shout(s):\n    raise NotImplementedError\n\n\ndef whisper(s):\n    return s.lower()\n"
HOOKS = ("post-index-change", "pre-commit", "post-commit", "post-checkout", "reference-transaction",
         "pre-applypatch", "post-applypatch")


def touch(markers: Path, name: str, then: str = "") -> str:
    return f"\"sh -c 'touch {markers}/PWNED-{name}{then}'\""


def drivers(markers: Path) -> str:
    """Filter and diff drivers (config of a repository, or a global one's, as git-lfs installs)."""
    return (f"[filter \"x\"]\n\tsmudge = {touch(markers, 'smudge', '; cat')}\n"
            f"\tclean = {touch(markers, 'clean', '; cat')}\n"
            f"[filter \"p\"]\n\tprocess = {touch(markers, 'process')}\n"
            f"[diff]\n\texternal = {touch(markers, 'external')}\n"
            f"[diff \"x\"]\n\ttextconv = {touch(markers, 'textconv', '; cat $1')}\n")


def planted_config(markers: Path) -> str:
    """A repository config in which every command git could run touches a file in `markers`
    (hooksPath is relative to the work tree: the same in the sandbox and on the host)."""
    return ("[core]\n\trepositoryformatversion = 0\n\tbare = false\n"
            f"\tfsmonitor = {touch(markers, 'fsmonitor', '; exit 1')}\n\thooksPath = .git/h\n" + drivers(markers))


ATTRIBUTES = "* filter=x diff=x\n*.p filter=p\n"
HOOK = "#!/bin/sh\ntouch {markers}/PWNED-hook-$(basename $0)\n"


def pwned(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.glob("PWNED-*"))


def plant(tree: Path, markers: Path) -> None:
    """What test code could leave in a tree: a repository with a hostile config and hooks, and
    the attributes that point every path at its drivers."""
    subprocess.run(["git", "init", "-q", str(tree)], check=True, capture_output=True)
    (tree / ".git" / "config").write_text(planted_config(markers))
    (tree / ".git" / "h").mkdir()
    for name in HOOKS:
        (tree / ".git" / "h" / name).write_text(HOOK.format(markers=markers))
        (tree / ".git" / "h" / name).chmod(0o755)
    (tree / ".gitattributes").write_text(ATTRIBUTES)


@pytest.fixture
def global_config(tmp_path, monkeypatch):
    """A global config for this test only (the machine's stays as it is): it trusts every
    directory, as CI images often do, and defines drivers of its own, as git-lfs does."""
    def write(markers: Path) -> Path:
        path = tmp_path / "global.gitconfig"
        path.write_text("[safe]\n\tdirectory = *\n" + drivers(markers))
        monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(path))
        return path

    return write


def patch_between(a: dict[str, str], b: dict[str, str], tmp: Path) -> str:
    for name, files in (("pa", a), ("pb", b)):
        make_repo(tmp / name, files, commit=False)
    return trees.diff_trees(tmp / "pa", tmp / "pb")


# --- the git calls alone ------------------------------------------------------------------


@pytest.mark.parametrize("how", ["trees.apply_patch", "workspace.apply_patch"])
def test_apply_ignores_a_planted_repository_and_attributes(how, tmp_path, global_config):
    markers = tmp_path / "markers"
    markers.mkdir()
    global_config(markers)
    tree = make_repo(tmp_path / "tree", {"a.txt": "one\ntwo\n", "b.p": "x\n"}, commit=False)
    patch = patch_between({"a.txt": "one\ntwo\n", "b.p": "x\n"}, {"a.txt": "one\nthree\n", "b.p": "y\n"}, tmp_path)
    plant(tree, markers)
    if how == "trees.apply_patch":
        trees.apply_patch(tree, patch)
    else:
        obs = Workspace(tree, None, None).execute(ToolCall(name="apply_patch", args={"patch": patch}))
        assert obs.ok, obs.text
    assert (tree / "a.txt").read_text() == "one\nthree\n" and (tree / "b.p").read_text() == "y\n"
    assert pwned(markers) == []
    # The trap is armed: plain git in the tree runs the planted drivers.
    subprocess.run(["git", "apply", "-R", "-"], input=patch, text=True, cwd=tree, capture_output=True)
    assert set(pwned(markers)) & {"PWNED-smudge", "PWNED-clean", "PWNED-process"}


def test_diff_ignores_planted_config_drivers_hooks_and_the_callers_git_variables(tmp_path, global_config,
                                                                                 monkeypatch):
    markers = tmp_path / "markers"
    markers.mkdir()
    global_config(markers)
    start = make_repo(tmp_path / "start", {"a.txt": "one\n", "b.txt": "x\n"})  # one commit, as a start state
    work = make_repo(tmp_path / "work", {"a.txt": "two\n", "b.txt": "y\n", "pkg/c.txt": "c\n"}, commit=False)
    plant(work, markers)
    plant(work / "pkg", markers)
    for var, value in (("GIT_DIR", work / ".git"), ("GIT_WORK_TREE", work), ("GIT_EXTERNAL_DIFF", "sh -c 'exit 1'"),
                       ("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor'='touch {markers}/PWNED-params'")):
        monkeypatch.setenv(var, str(value))
    patch = final_patch(start, work)
    assert pwned(markers) == []
    assert "+two" in patch and "+y" in patch and "+c" in patch and "+* filter=x diff=x" in patch
    assert "pkg/.git/" not in patch and "Subproject" not in patch
    shutil.rmtree(work / "pkg" / ".git")  # below the root a .git is a submodule: final_patch leaves them out
    direct = trees.diff_trees(start, work)  # the work tree itself, its own .git and .gitattributes in place
    assert pwned(markers) == [] and "+two" in direct
    # The trap is armed: plain git in the tree runs fsmonitor, the hooks, the filter and diff.external.
    for var in ("GIT_DIR", "GIT_WORK_TREE", "GIT_EXTERNAL_DIFF", "GIT_CONFIG_PARAMETERS"):
        monkeypatch.delenv(var)
    for name in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{name}_NAME", "t")
        monkeypatch.setenv(f"GIT_{name}_EMAIL", "t@t")
    for argv in (["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        subprocess.run(argv, cwd=work, capture_output=True)
    (work / "a.txt").write_text("three\n")
    subprocess.run(["git", "diff"], cwd=work, capture_output=True)
    assert {"PWNED-fsmonitor", "PWNED-hook-post-index-change", "PWNED-hook-pre-commit", "PWNED-clean",
            "PWNED-external"} <= set(pwned(markers))


def test_commit_tree_never_runs_what_an_sdists_git_carries(tmp_path, global_config):
    markers = tmp_path / "markers"
    markers.mkdir()
    global_config(markers)
    tree = make_repo(tmp_path / "sdist", {"m.py": "x = 1\n", "pkg/n.py": "y = 2\n"}, commit=False)
    plant(tree, markers)
    commit = commit_tree(tree, "sdist")
    assert pwned(markers) == []
    git = ["git", "--git-dir", str(tree / ".git"), "-c", "safe.directory=*"]
    assert subprocess.run([*git, "rev-list", "--count", "HEAD"], capture_output=True, text=True).stdout.strip() == "1"
    listed = subprocess.run([*git, "ls-tree", "-r", "--name-only", commit], capture_output=True, text=True).stdout
    assert listed.split() == [".gitattributes", "m.py", "pkg/n.py"]
    assert "PWNED" not in (tree / ".git" / "config").read_text()
    # The trap was armed: before the fix, `git init` kept this config and `git add` ran it.
    plant(tmp_path / "again", markers)
    subprocess.run(["git", "add", "-A"], cwd=tmp_path / "again", capture_output=True)
    assert "PWNED-fsmonitor" in pwned(markers)


def test_patches_apply_and_diff_byte_for_byte_whatever_the_attributes(tmp_path):
    before = {".gitattributes": "* text eol=crlf ident\n", "a.txt": "$Id$\r\none\r\n", "b.txt": "plain\n"}
    after = {".gitattributes": "* text eol=crlf ident\n", "a.txt": "$Id$\r\ntwo\r\n", "b.txt": "plain\r\n"}
    patch = patch_between(before, after, tmp_path)
    assert "-one\r\n+two\r\n" in patch and "-plain\n+plain\r\n" in patch
    tree = make_repo(tmp_path / "t", before, commit=False)
    trees.apply_patch(tree, patch)
    assert {rel: (tree / rel).read_bytes().decode() for rel in before} == after


# --- the sweep ------------------------------------------------------------------------------


SWEEP_SCRIPT = r"""
import json, os, sys
from pathlib import Path
from featdel.code import hostgit
tree, outside = Path(sys.argv[1]), Path(sys.argv[2])
kept = hostgit.gitattributes(tree)
# what a run leaves: repositories, a gitfile, links to the outside, a changed and a new .gitattributes
(tree / ".git" / "objects" / "locked").mkdir(parents=True)
(tree / ".git" / "objects" / "locked" / "f").write_text("x")
(tree / ".git" / "config").write_text("[core]\n")
os.chmod(tree / ".git" / "objects" / "locked", 0)
os.chmod(tree / ".git" / "objects", 0o500)
(tree / "pkg" / ".git").write_text("gitdir: /etc\n")
os.symlink(outside, tree / "pkg" / "deep" / ".git")
(tree / ".gitattributes").write_text("* filter=x\n")
(tree / "pkg" / "deep" / ".gitattributes").write_text("* filter=x\n")
os.symlink(outside / "attrs", tree / "pkg" / "link" / ".gitattributes")
(tree / "pkg" / "dir" / ".gitattributes").mkdir()
os.chmod(tree / "pkg" / "deep", 0o555)
print(json.dumps(sorted(hostgit.sweep(tree, kept))))
"""


@pytest.mark.parametrize("mode", ["root", "non-root"])
def test_sweep_removes_what_the_run_planted_and_never_follows_a_link(mode):
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("root mode needs root")
    base = Path(tempfile.mkdtemp(prefix="featdel-sweep-"))
    try:
        tree, outside = base / "tree", base / "outside"
        for rel, text in {".gitattributes": "*.bin binary\n", "pkg/m.py": "x = 1\n", "pkg/deep/n.py": "",
                          "pkg/link/l.py": "", "pkg/dir/d.py": "", "outside/attrs": "keep\n",
                          "outside/.git/HEAD": "keep\n"}.items():
            path = (base / rel) if rel.startswith("outside/") else (tree / rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        argv = [sys.executable, "-c", SWEEP_SCRIPT, str(tree), str(outside)]
        if mode == "non-root":
            argv = as_other_user(base, argv)
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=child_env(), cwd=REPO_ROOT)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout) == [".git", ".gitattributes", "pkg/.git", "pkg/deep/.git",
                                           "pkg/deep/.gitattributes", "pkg/dir/.gitattributes",
                                           "pkg/link/.gitattributes"]
        left = {p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.name in (".git", ".gitattributes")}
        assert left == {".gitattributes"} and (tree / ".gitattributes").read_text() == "*.bin binary\n"
        assert (outside / "attrs").read_text() == "keep\n" and (outside / ".git" / "HEAD").read_text() == "keep\n"
    finally:
        subprocess.run(["chmod", "-R", "u+rwx", str(base)], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def as_other_user(owned: Path, argv: list[str]) -> list[str]:
    """`argv` as a non-root user owning `owned`: this process if it is not root, else OTHER_UID.
    When that user cannot reach this interpreter (pyenv under a 0700 /root), a private mount
    namespace shows it the interpreter's folder and nothing else of the folder that hides it."""
    if os.geteuid() != 0:
        return argv
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} (util-linux) is needed to run as a non-root user")
    owned.chmod(0o755)
    subprocess.run(["chown", "-R", f"{OTHER_UID}:{OTHER_UID}", str(owned)], check=True)
    cmd = ["setpriv", f"--reuid={OTHER_UID}", f"--regid={OTHER_UID}", "--clear-groups", *argv]
    prefix = Path(sys.base_prefix).resolve()
    hidden = next((p for p in reversed(prefix.parents) if not p.stat().st_mode & 0o001), None)
    if hidden is None:
        return cmd
    if subprocess.run(["unshare", "--mount", "true"], capture_output=True).returncode != 0:
        pytest.skip(f"{prefix} is out of a non-root user's reach and no mount namespace can be made")
    keep = owned / "featdel-keep"  # where the interpreter's folder waits while the tmpfs goes on
    keep.mkdir(exist_ok=True)
    child = hidden / prefix.relative_to(hidden).parts[0]
    show = ('set -e; mount --bind "$1" "$3"; mount -t tmpfs -o mode=0755 featdel-view "$2"; mkdir "$1"; '
            'mount --bind "$3" "$1"; umount "$3"; shift 3; exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", show, "sh", str(child), str(hidden),
            str(keep), *cmd]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    return {**env, "PYTHONPATH": str(REPO_ROOT), "PYTHONDONTWRITEBYTECODE": "1", **extra}


# --- end to end: test code in the sandbox plants, the workspace and the episode stay clean --------

SCENARIO = r"""
import json, os, subprocess, sys
from pathlib import Path
from featdel.code import hostgit
from featdel.agent.episode import AgentTask, EpisodeConfig, TaskEnv, final_patch
from featdel.agent.protocol import ToolCall
from featdel.env.envs import load
from featdel.grading.grade import GradeTask
from featdel.sandboxes import get_backend

a = json.loads(Path(sys.argv[1]).read_text())
if not a["sweep"]:
    hostgit.sweep = lambda tree, kept: []  # the git calls alone must hold
task = AgentTask(grade=GradeTask(instance_id="plantlib__shout", env=load(Path(a["env_dir"])),
                                 snapshot=Path(a["snapshot"]), deletion_patch=a["deletion_patch"],
                                 gold_patch=a["gold"], fail_to_pass=a["f2p"], pass_to_pass=a["p2p"], timeout_s=60))
env = TaskEnv(task, get_backend("local"), Path(a["workdir"]), EpisodeConfig())
out = {}
def call(name, **args):
    obs = env.execute(ToolCall(name=name, args=args))
    return obs.ok, obs.text
out["write"] = call("write_file", path="tests/test_plant.py", content=a["plant"])
out["run"] = call("run_tests", tests=["tests/test_plant.py::test_plant"])
out["left"] = sorted(p.relative_to(env.work).as_posix() for p in env.work.rglob("*")
                     if p.name in (".git", ".gitattributes"))
out["apply"] = call("apply_patch", patch=a["gold"])
out["text"] = (env.work / "plantlib" / "text.py").read_text()
out["patch"] = final_patch(env.start, env.work)
out["pwned"] = sorted(p.name for p in Path(a["markers"]).iterdir())
# the control: what plain git (the code before the fix) does in this tree
subprocess.run(["git", "apply", "-R", "-"], input=a["gold"], text=True, cwd=env.work, capture_output=True)
out["pwned_by_plain_git"] = sorted(p.name for p in Path(a["markers"]).iterdir())
print(json.dumps(out))
"""

PLANT_TEST = '''import pathlib

CONFIG = {config!r}
ATTRIBUTES = {attributes!r}
HOOK = {hook!r}


def test_plant():
    root = pathlib.Path(__file__).resolve().parents[1]
    for base in (root, root / "plantlib"):
        git = base / ".git"
        for sub in ("objects", "refs/heads", "h"):
            (git / sub).mkdir(parents=True, exist_ok=True)
        (git / "HEAD").write_text("ref: refs/heads/main\\n")
        (git / "config").write_text(CONFIG)
        for name in {hooks!r}:
            (git / "h" / name).write_text(HOOK)
            (git / "h" / name).chmod(0o755)
        (base / ".gitattributes").write_text(ATTRIBUTES)
    (root / ".git" / "objects" / "locked").mkdir()
    (root / ".git" / "objects" / "locked").chmod(0)
'''


@pytest.fixture(scope="module")
def plant_task(tmp_path_factory, featdel_cache, local_backend):
    """A mined tiny task whose env, snapshot and patches sit in a folder any user can traverse
    (pytest's own are root-only), so a non-root featdel can run it too."""
    from featdel.code.trees import diff

    base = Path(tempfile.mkdtemp(prefix="featdel-hostgit-e2e-"))
    base.chmod(0o755)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("FEATDEL_CACHE", str(base / "cache"))
        run_dir, record = mine_tiny(tmp_path_factory, "plantlib", LIB, local_backend)
    snapshot = base / "snapshot.tar.gz"
    shutil.copy(run_dir / "repos" / record.name / "snapshot.tar.gz", snapshot)
    deletion_patch, gold = diff(snapshot, {"plantlib/text.py": STUBBED})
    yield {"base": base, "env_dir": str(Path(record.env_dir).resolve()), "snapshot": str(snapshot),
           "deletion_patch": deletion_patch, "gold": gold,
           "f2p": ["tests/test_text.py::test_shout", "tests/test_text.py::test_shout_empty"],
           "p2p": ["tests/test_text.py::test_whisper", "tests/test_text.py::test_whisper_empty"]}
    subprocess.run(["chmod", "-R", "u+rwx", str(base)], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


def run_scenario(plant_task, name: str, *, non_root: bool, safe_directory: bool, sweep: bool) -> dict:
    case = plant_task["base"] / name
    markers, home = case / "markers", case / "home"
    for path in (markers, home):
        path.mkdir(parents=True)
    # The global config the old code would have read: `safe.directory = *` or nothing at all.
    (home / ".gitconfig").write_text("[safe]\n\tdirectory = *\n" if safe_directory else "")
    plant = PLANT_TEST.format(config=planted_config(markers), attributes=ATTRIBUTES, hooks=HOOKS,
                              hook=HOOK.format(markers=markers))
    args = {k: v for k, v in plant_task.items() if k != "base"}
    args.update(workdir=str(case / "work"), markers=str(markers), plant=plant, sweep=sweep)
    (case / "args.json").write_text(json.dumps(args))
    argv = [sys.executable, "-c", SCENARIO, str(case / "args.json")]
    if non_root:
        argv = as_other_user(plant_task["base"], argv)
    elif os.geteuid() != 0:
        pytest.skip("root mode needs root")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=REPO_ROOT,
                          env=child_env(HOME=str(home), FEATDEL_CACHE=str(plant_task["base"] / "cache"),
                                        GIT_CONFIG_GLOBAL=str(home / ".gitconfig")))
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["write"][0] and out["run"][0] and out["run"][1].startswith("1 of 1 tests passed"), out["run"]
    assert out["apply"][0], out["apply"]
    assert out["text"] == LIB["plantlib/text.py"]
    assert "+    return s.upper() + '!'" in out["patch"] and "tests/test_plant.py" in out["patch"]
    named = re.findall(r"^diff --git a/(\S+) b/", out["patch"], re.MULTILINE)
    assert not [n for n in named if ".git" in Path(n).parts], named
    assert out["pwned"] == [], out["pwned"]
    return {**out, "named": named}


@pytest.mark.parametrize("safe_directory", [False, True], ids=["default-config", "safe.directory=*"])
@pytest.mark.parametrize("non_root", [False, True], ids=["root", "non-root"])
def test_a_run_leaves_no_git_and_nothing_planted_runs(plant_task, non_root, safe_directory):
    out = run_scenario(plant_task, f"swept-{non_root}-{safe_directory}", non_root=non_root,
                       safe_directory=safe_directory, sweep=True)
    assert out["left"] == []
    assert "plantlib/text.py" in out["named"] and not [n for n in out["named"] if n.endswith(".gitattributes")]


@pytest.mark.parametrize("non_root,safe_directory", [(False, True), (True, False), (True, True)],
                         ids=["root-safe.directory=*", "non-root", "non-root-safe.directory=*"])
def test_without_the_sweep_the_git_calls_alone_run_nothing_planted(plant_task, non_root, safe_directory):
    """Where git would trust the planted repository (as root only with `safe.directory = *`)."""
    out = run_scenario(plant_task, f"unswept-{non_root}-{safe_directory}", non_root=non_root,
                       safe_directory=safe_directory, sweep=False)
    assert {".git", ".gitattributes", "plantlib/.git", "plantlib/.gitattributes"} <= set(out["left"])
    assert {"PWNED-clean", "PWNED-smudge"} <= set(out["pwned_by_plain_git"]), out

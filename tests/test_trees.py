"""A stub variant's tree is built from a copy of the deletion's start state, the files the
deletion changed put back and the variant's written over it (`trees.variant_state`), instead of
making a patch from the snapshot and applying it: the two must give the same tree, file for file,
mode for mode and directory for directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from featdel.code import trees
from tests.conftest import make_repo


def _layout(tree: Path) -> tuple[str, list[str], dict[str, int]]:
    dirs, modes = [], {}
    for dirpath, names, files in os.walk(tree):
        names[:] = [n for n in names if n != ".git"]
        rel = Path(dirpath).relative_to(tree).as_posix()
        dirs.append(rel)
        modes.update({f"{rel}/{f}": os.lstat(Path(dirpath) / f).st_mode for f in files})
    return trees.tree_digest(tree), sorted(dirs), modes


def test_a_variant_state_is_the_start_state_of_the_variant_s_edits(tmp_path):
    repo = make_repo(tmp_path / "repo", {
        "pkg/__init__.py": "from pkg.a import f\nfrom pkg.b import g\n",
        "pkg/a.py": "def f():\n    return 1\n",
        "pkg/b.py": "def g():\n    return 2\n",
        "pkg/sub/__init__.py": "X = 1\n",  # its only file goes: the directory goes with it
        "pkg/deep/er/mod.py": "Y = 2\n",
        "pkg/gone/only.py": "W = 4\n",  # the deletion removes it, the variant brings it back
        "tools/run.sh": "#!/bin/sh\necho hi\n",
        "tests/test_a.py": "from pkg import f\n\n\ndef test_f():\n    assert f() == 1\n",
    })
    (repo / "tools" / "run.sh").chmod(0o755)
    import subprocess

    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "mode"], cwd=repo, check=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, check=True, capture_output=True, text=True).stdout.strip()
    snapshot = tmp_path / "snap.tar.gz"
    trees.write_snapshot(repo, head, snapshot)
    original = trees.extract(snapshot, tmp_path / "original")
    # the deletion: f and g gone, their wiring cut, a module and an executable changed, a file added
    deletion = {"pkg/a.py": "", "pkg/b.py": "", "pkg/__init__.py": "", "pkg/gone/only.py": None,
                "pkg/sub/__init__.py": None, "pkg/added/new.py": "V = 5\n", "tools/run.sh": "#!/bin/sh\necho bye\n"}
    start = trees.start_state(snapshot, trees.diff(snapshot, deletion)[0], tmp_path / "start")
    # the variant: a stub of f in its home, the module the deletion removed stays removed
    variant = {"pkg/a.py": "def f():\n    pass\n", "pkg/sub/__init__.py": None, "pkg/deep/er/mod.py": None}
    by_patch = trees.start_state(snapshot, trees.diff(snapshot, variant)[0], tmp_path / "by-patch")
    restored = trees.variant_state(start, original, set(deletion), variant)
    assert _layout(start) == _layout(by_patch)
    assert restored == ["pkg/__init__.py", "pkg/b.py", "pkg/gone/only.py", "tools/run.sh"]
    assert not (start / "pkg" / "added").exists() and not (start / "pkg" / "deep").exists()
    assert os.stat(start / "pkg" / "b.py").st_mtime_ns == os.stat(original / "pkg" / "b.py").st_mtime_ns  # its pyc holds
    assert (start / ".git").is_dir() and (original / "pkg" / "sub" / "__init__.py").is_file()  # original untouched


def test_a_kept_start_state_is_copied_never_shared_and_follows_its_snapshot(tmp_path):
    """featdel.code.starts: the same tree as a build, a fresh copy for every caller (one that
    writes to its copy changes no other), and a snapshot replaced at the same path is rebuilt."""
    from featdel.code import starts

    repo = make_repo(tmp_path / "repo", {"pkg/a.py": "def f():\n    return 1\n", "tests/test_a.py": "X = 1\n"})
    snapshot = tmp_path / "snap.tar.gz"
    trees.write_snapshot(repo, "HEAD", snapshot)
    patch, _ = trees.diff(snapshot, {"pkg/a.py": "def f():\n    pass\n"})
    built = trees.start_state(snapshot, patch, tmp_path / "built")
    first = starts.start_state(snapshot, patch, tmp_path / "first")
    (first / "pkg" / "a.py").write_text("tampered\n")
    second = starts.start_state(snapshot, patch, tmp_path / "second")
    assert _layout(second) == _layout(built) != _layout(first)
    repo_b = make_repo(tmp_path / "repo-b", {"pkg/a.py": "def f():\n    return 2\n", "tests/test_a.py": "X = 1\n"})
    trees.write_snapshot(repo_b, "HEAD", tmp_path / "snap-b.tar.gz")
    os.replace(tmp_path / "snap-b.tar.gz", snapshot)  # another snapshot at the same path
    assert "return 2" in starts.start_state(snapshot, "", tmp_path / "third").joinpath("pkg", "a.py").read_text()


def test_an_edit_differ_gives_diff_trees_bytes_both_ways(tmp_path):
    """featdel.code.hostgit.EditDiffer hashes the original once and only the edited files after:
    its patches are `diff_trees`' byte for byte, for a changed, a removed, a new and an executable
    file, a path git would read as a pattern, and a file the original lacks marked removed."""
    from featdel.code.hostgit import EditDiffer

    original = tmp_path / "original"
    for rel, text in {"pkg/a.py": "def f():\n    return 1\n", "pkg/b.py": "X = 1\n", "pkg/[ab].py": "Y = 2\n",
                      "run.sh": "#!/bin/sh\necho hi\n", "data.txt": "one\r\ntwo\r\n"}.items():
        (original / rel).parent.mkdir(parents=True, exist_ok=True)
        (original / rel).write_text(text, newline="")
    (original / "run.sh").chmod(0o755)
    edits = [
        {"pkg/a.py": "def f():\n    pass\n"},
        {"pkg/b.py": None, "pkg/new/mod.py": "Z = 3\n"},
        {"run.sh": "#!/bin/sh\necho bye\n", "pkg/[ab].py": "Y = 3\n"},
        {"pkg/missing.py": None, "data.txt": "one\r\nthree\r\n"},
    ]
    with EditDiffer(original) as differ:
        for n, files in enumerate(edits):
            edited = Path(shutil.copytree(original, tmp_path / f"edited-{n}"))
            trees.apply_edits(edited, files)
            assert differ.plain(files)
            assert differ.diff(files) == (trees.diff_trees(original, edited), trees.diff_trees(edited, original)), files
        (original / "link.py").symlink_to("pkg/a.py")
        assert not differ.plain({"link.py": "X = 2\n"})  # a symlink: whole-tree diffs instead

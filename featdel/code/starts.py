"""Start states built once per process and copied after (`featdel.code.trees.start_state`).

In: a snapshot file, a deletion patch, a destination. Out: the destination holding exactly
what `trees.start_state(snapshot, deletion_patch, dest)` would build there. The first call for
a (snapshot, deletion patch) builds it (extract, `git apply`, scrub, commit) into a directory
of this process; later calls copy that, which costs a fraction of a build. One candidate's
verification builds the same start state for its own runs, the grader's no-op run, the
reference's held-out run and the gold run; a batch of predictions or an RL group grades many
patches of one task.

The kept trees are never run or written: every caller gets its own copy. A snapshot replaced at
the same path (another size, time or inode) is another key. At most `KEPT` are kept, oldest out.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

KEPT = 16

_lock = threading.Lock()
_kept: dict[tuple, Path] = {}
_root: dict[int, Path] = {}  # pid -> that process's directory of kept trees, made on first use
_names = itertools.count()


def start_state(snapshot: Path, deletion_patch: str, dest: Path) -> Path:
    """`trees.start_state(snapshot, deletion_patch, dest)`, from a tree kept for this process."""
    from featdel.code import trees

    st = os.stat(snapshot)
    key = (str(Path(snapshot).resolve()), st.st_size, st.st_mtime_ns, st.st_ino,
           hashlib.sha256(deletion_patch.encode("utf-8", "surrogateescape")).hexdigest())
    with _lock:
        if os.getpid() not in _root:  # first use, or a forked child: the parent's trees are not ours
            _kept.clear()
        kept = _kept.get(key)
        if kept is None:
            kept = _directory() / f"start-{next(_names)}"
            try:
                trees.start_state(snapshot, deletion_patch, kept)
            except BaseException:  # a patch that does not apply: nothing kept
                shutil.rmtree(kept, ignore_errors=True)
                raise
            _kept[key] = kept
            while len(_kept) > KEPT:
                shutil.rmtree(_kept.pop(next(iter(_kept))), ignore_errors=True)
        return trees.copy_tree(kept, dest)


def _directory() -> Path:
    pid = os.getpid()
    if pid not in _root:
        root = Path(tempfile.mkdtemp(prefix=f"featdel-starts-{pid}-"))
        atexit.register(_remove, root, pid)
        _root[pid] = root
    return _root[pid]


def _remove(root: Path, pid: int) -> None:
    if os.getpid() == pid:  # a forked child leaves its parent's directory alone
        shutil.rmtree(root, ignore_errors=True)

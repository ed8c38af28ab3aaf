"""Invariant: removing a name together with its wiring leaves a package that imports (a real
import check): re-exports (`name` and `name as name`) are followed through `__init__.py` chains, `__all__` entries, aliases
(`other = name`, `name = curry(pkg.name)`, and the alias's own `__all__` entry), registry entries and `register(name)` calls go with
it, and a module that imports the name *and calls it* keeps its import, so that step fails the
check and is rolled back rather than leaving a dangling name."""

from __future__ import annotations

from pathlib import Path

import pytest
from importcheck import import_check

from featdel.core.records import Candidate
from featdel.deletion import RolledBack, delete
from featdel.deletion.base import Tree
from featdel.deletion.wiring import find
from tests.conftest import make_repo

CORE = '''\
REGISTRY = {}


def register(fn):
    REGISTRY[fn.__name__] = fn
    return fn


def scale(x):
    """Scale x."""
    return x * 3


def other(x):
    return x


TABLE = {"scale": scale, "other": other}
times3 = scale
register(scale)
__all__ = ("scale", "other", "times3")
'''


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    files = {
        "pkg/__init__.py": "from pkg.api import scale, other\n",
        "pkg/api.py": "from pkg.core import scale, other\n\n__all__ = ['scale', 'other']\n",
        "pkg/core.py": CORE,
        "pkg/curried.py": "import pkg\n\n\ndef curry(f):\n    return f\n\n\nscale = curry(pkg.scale)\nkeep = 1\n",
        "pkg/user.py": "from pkg.core import other\n\n\ndef use():\n    return other(1)\n",
        "pkg/typed.py": "from pkg.core import other\nfrom pkg.core import scale as scale\n",  # PEP 484 re-export
    }
    return make_repo(tmp_path_factory.mktemp("wired"), files, commit=False)


def test_every_kind_of_wiring_is_found(repo):
    labels = find(Tree.open(repo), "pkg/core.py", "scale").labels
    assert sorted(labels) == sorted([
        "pkg/api.py::scale (import)", "pkg/__init__.py::scale (import)", "pkg/api.py::scale (__all__)",
        "pkg/core.py::TABLE entry (TABLE entry)", "pkg/core.py::times3 (alias)", "pkg/core.py::scale (registration)",
        "pkg/core.py::scale (__all__)", "pkg/curried.py::scale (alias)", "pkg/core.py::times3 (__all__)",
        "pkg/typed.py::scale (import)",
    ])


def test_function_removed_with_its_wiring_leaves_an_importable_package(repo):
    cand = Candidate(repo="w", path="pkg/core.py", qualname="scale", kind="function", lines=3, tests=[])
    d = delete(repo, cand, "function", check=import_check(repo))
    core = d.files["pkg/core.py"]
    assert "def scale" not in core and "times3 = scale" not in core and "register(scale)" not in core
    assert 'TABLE = {"other": other}' in core and '__all__ = ("other",)' in core
    assert d.files["pkg/__init__.py"] == "from pkg.api import other\n"
    assert d.files["pkg/api.py"] == "from pkg.core import other\n\n__all__ = ['other']\n"
    assert d.files["pkg/curried.py"].endswith("    return f\n\n\nkeep = 1\n")
    assert d.deleted_symbols == ["pkg/core.py::scale"] and len(d.wiring) == 10
    assert d.files["pkg/typed.py"] == "from pkg.core import other\n"


def test_a_module_that_calls_the_name_is_not_wiring(repo):
    assert "pkg/user.py::other (import)" not in find(Tree.open(repo), "pkg/core.py", "other").labels
    cand = Candidate(repo="w", path="pkg/core.py", qualname="other", kind="function", lines=2, tests=[])
    with pytest.raises(RolledBack, match="with its wiring too: pkg.user"):
        delete(repo, cand, "function", check=import_check(repo))

"""Invariant: the `file` strategy removes a module only when no other source module imports it at
import time (the package's `__init__.py` included, `try:` blocks included); a module imported only
inside functions or by tests goes, mapped to None, with every other file untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from importcheck import import_check

from featdel.core.records import Candidate
from featdel.deletion import NotApplicable, delete
from tests.conftest import make_repo as write_files


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("repo")
    files = {
        "src/pkg/__init__.py": "from . import eager\nfrom .sub import api\n",
        "src/pkg/eager.py": "def now():\n    return 1\n",
        "src/pkg/lazy.py": '"""Lazy."""\n\n\ndef later():\n    return 2\n\n\nclass Thing:\n    def go(self):\n        return 3\n',
        "src/pkg/guarded.py": "def fast():\n    return 4\n",
        "src/pkg/sub/__init__.py": "",
        "src/pkg/sub/api.py": (
            "try:\n    from ..guarded import fast\nexcept ImportError:\n    fast = None\n\n\n"
            "def use_lazy():\n    from pkg.lazy import later\n    return later()\n"
        ),
        "tests/test_lazy.py": "from pkg.lazy import later\n\n\ndef test_later():\n    assert later() == 2\n",
    }
    return write_files(root, files, commit=False)


@pytest.fixture(scope="module")
def check(repo):
    return import_check(repo)


def file_candidate(path: str) -> Candidate:
    return Candidate(repo="tiny", path=path, qualname="", kind="file", lines=5, tests=[])


def test_lazily_imported_module_is_removed(repo, check):
    d = delete(repo, file_candidate("src/pkg/lazy.py"), "file", check=check)
    assert d.files == {"src/pkg/lazy.py": None}
    assert d.removed == [(repo / "src/pkg/lazy.py").read_text()]
    assert d.deleted_symbols == ["src/pkg/lazy.py::later", "src/pkg/lazy.py::Thing", "src/pkg/lazy.py::Thing.go"]
    assert check(d.files) is True


def test_file_strategy_refuses_a_module_the_package_imports_at_top_level(repo, check):
    with pytest.raises(NotApplicable, match=r"src/pkg/__init__.py:1 imports pkg.eager"):
        delete(repo, file_candidate("src/pkg/eager.py"), "file", check=check)


def test_relative_import_inside_try_still_counts(repo, check):
    with pytest.raises(NotApplicable, match=r"src/pkg/sub/api.py:2 imports pkg.guarded"):
        delete(repo, file_candidate("src/pkg/guarded.py"), "file", check=check)


def test_package_init_and_non_file_candidates_are_refused(repo, check):
    with pytest.raises(NotApplicable, match="never removed"):
        delete(repo, file_candidate("src/pkg/sub/__init__.py"), "file", check=check)
    with pytest.raises(NotApplicable, match="never removed"):
        delete(repo, file_candidate("tests/test_lazy.py"), "file", check=check)
    cand = Candidate(repo="tiny", path="src/pkg/lazy.py", qualname="later", kind="function", lines=2, tests=[])
    with pytest.raises(NotApplicable, match="not 'file'"):
        delete(repo, cand, "file", check=check)


def test_the_import_check_sees_a_broken_removal(repo, check):
    verdict = check({"src/pkg/eager.py": None})
    assert isinstance(verdict, str) and "pkg" in verdict and "<repo>" not in verdict.split(":")[0]
    assert check({"src/pkg/sub/api.py": "def broken(:\n"}).startswith("src/pkg/sub/api.py: SyntaxError")


def test_the_import_check_refuses_modules_that_resolve_outside_the_copy(repo):
    verdict = import_check(repo, modules=["json"])({})
    assert isinstance(verdict, str) and "not the edited copy" in verdict

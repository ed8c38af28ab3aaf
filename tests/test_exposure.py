"""The audit of what a sandbox shows beside the task finds other copies of a repository's code.

Pins: a copy of the package by name is found anywhere in a shown root, also inside a wheel and
when reformatted; a file with two distinct deleted lines is found, one generic line is not; a
hidden subtree and the writable work tree are not searched; a copy planted in a task's
virtualenv makes verification reject the candidate at `leak`; on this machine the interpreter's
own bundled setuptools wheel is found to vendor `more_itertools`.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

import pytest

from featdel.code import exposure
from featdel.sandboxes.base import Visible

NEEDLES = ["value = compute_the_total(items)", "return normalise(value, scale=3)"]


def _root(path: Path, **kw) -> Visible:
    return Visible(host=path, inside=path, writable=kw.pop("writable", False), system=False, **kw)


def test_a_copy_by_name_is_found_even_reformatted_or_zipped(tmp_path):
    plain = tmp_path / "a" / "lib" / "_vendor" / "tinylib"
    plain.mkdir(parents=True)
    (plain / "__init__.py").write_text("x=1  # reformatted beyond any line match\n")
    assert "another copy of the package `tinylib`" in exposure.audit([_root(tmp_path / "a")], NEEDLES, ["tinylib"])
    wheel = tmp_path / "b" / "bundle.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("vendored/tinylib/__init__.py", "")
    assert "bundle.whl!vendored/tinylib/__init__.py" in exposure.audit([_root(tmp_path / "b")], NEEDLES, ["tinylib"])
    # A module of the same name inside another package is a different module.
    other = tmp_path / "c" / "urllib2"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    (other / "tinymod.py").write_text("")
    assert exposure.audit([_root(tmp_path / "c")], NEEDLES, ["tinymod"]) is None


def test_lines_need_two_distinct_needles_outside_the_tree(tmp_path):
    (tmp_path / "one").mkdir()
    (tmp_path / "one" / "generic.py").write_text(f"    {NEEDLES[0]}\n")
    assert exposure.audit([_root(tmp_path / "one")], NEEDLES, []) is None
    (tmp_path / "two").mkdir()
    (tmp_path / "two" / "copy.txt").write_text("\n".join(f"  {n}" for n in NEEDLES) + "\n")
    assert "copy.txt" in exposure.audit([_root(tmp_path / "two")], NEEDLES, [])


def test_hidden_subtrees_and_writable_roots_are_not_searched(tmp_path):
    site = tmp_path / "prefix" / "lib" / "site-packages" / "tinylib"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("")
    hidden = (tmp_path / "prefix" / "lib" / "site-packages",)
    assert exposure.audit([_root(tmp_path / "prefix", hidden=hidden)], NEEDLES, ["tinylib"]) is None
    assert exposure.audit([_root(tmp_path / "prefix", writable=True)], NEEDLES, ["tinylib"]) is None
    assert exposure.audit([_root(tmp_path / "prefix")], NEEDLES, ["tinylib"]) is not None


def test_the_interpreter_prefix_is_searched_inside_its_bundled_wheels():
    prefix = Path(sys.base_prefix)
    bundled = list(prefix.glob("lib/python3*/ensurepip/_bundled/setuptools-*.whl"))
    if not bundled:
        pytest.skip("this interpreter ships no bundled wheels (Debian's); pyenv and python.org's do")
    found = exposure.audit([_root(prefix)], NEEDLES, ["more_itertools"])
    assert found and "setuptools" in found


def test_a_package_of_the_same_name_that_shares_no_module_is_another_package(tmp_path):
    """click's environment holds `pallets_sphinx_themes/themes/click` (__init__.py, domain.py), a
    Sphinx theme: no copy of click, whose package has core.py, types.py and more. A vendored copy
    keeps the module names and is found, in a directory or a wheel; so is any place of the name
    when the repository's package is one module, or only an __init__.py."""
    own = {"tinylib": frozenset({"__init__.py", "core.py", "types.py"})}
    theme = tmp_path / "t" / "themes" / "tinylib"
    theme.mkdir(parents=True)
    (theme / "__init__.py").write_text("")
    (theme / "domain.py").write_text("")
    assert exposure.audit([_root(tmp_path / "t")], NEEDLES, own) is None
    assert exposure.audit([_root(tmp_path / "t")], NEEDLES, ["tinylib"]) is not None  # bare names: any place
    assert exposure.audit([_root(tmp_path / "t")], NEEDLES, {"tinylib": frozenset({"__init__.py"})}) is not None
    vendored = tmp_path / "t" / "_vendor" / "tinylib"
    vendored.mkdir(parents=True)
    for name in ("__init__.py", "core.py"):
        (vendored / name).write_text("")
    exposure.forget()  # the root changed
    assert "_vendor/tinylib" in exposure.audit([_root(tmp_path / "t")], NEEDLES, own)
    wheel = tmp_path / "w" / "bundle.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("themes/tinylib/__init__.py", "")
        zf.writestr("vendored/tinylib/__init__.py", "")
        zf.writestr("vendored/tinylib/types.py", "")
    assert "bundle.whl!vendored/tinylib/__init__.py" in exposure.audit([_root(tmp_path / "w")], NEEDLES, own)


def test_package_files_reads_the_repository_s_modules(tmp_path):
    (tmp_path / "src" / "tinylib").mkdir(parents=True)
    for name in ("__init__.py", "core.py", "data.txt"):
        (tmp_path / "src" / "tinylib" / name).write_text("")
    (tmp_path / "tinymod.py").write_text("")
    assert exposure.package_files(tmp_path, ["src/tinylib", "tinymod.py"]) == {
        "tinylib": frozenset({"__init__.py", "core.py"}), "tinymod": frozenset()}

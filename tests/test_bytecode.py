"""featdel.env.bytecode: the original's bytecode, compiled once in the sandbox, reused by the
test runs of verification, never for a file a candidate changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from featdel.code import trees
from featdel.env.bytecode import overlay, source_of
from featdel.env.testrun import RunOptions
from tests.conftest import TINY_LIB, mine_tiny


def test_a_pyc_is_mapped_to_its_source():
    assert source_of("pkg/__pycache__/mod.cpython-311.pyc") == "pkg/mod.py"
    assert source_of("tests/__pycache__/test_a.cpython-312-pytest-8.3.4.pyc") == "tests/test_a.py"
    assert source_of("__pycache__/setup.cpython-311.pyc") == "setup.py"
    assert source_of("pkg/mod.cpython-311.pyc") is None  # not in a __pycache__
    assert source_of("pkg/__pycache__/mod.cpython-311.opt-1.pyc") is None  # never written by a run


@pytest.fixture(scope="module")
def ctx(tmp_path_factory, featdel_cache, local_backend):
    from featdel.pipeline.context import RepoContext

    run_dir, record = mine_tiny(tmp_path_factory, "bclib", TINY_LIB, local_backend)
    return RepoContext.load(run_dir, record)


def test_harvest_compiles_library_and_rewritten_tests_and_leaves_the_original_alone(ctx, local_backend):
    before = sorted(p.relative_to(ctx.original()).as_posix() for p in ctx.original().rglob("*"))
    with ctx.runner(local_backend) as runner:
        pycs = ctx.bytecode(runner, 120.0)
    sources = {source_of(rel) for rel in pycs}
    assert any("-pytest-" in rel for rel in pycs), sorted(pycs)  # pytest's rewritten test modules
    assert {s for s in sources if not s.startswith("tests/")}, sorted(pycs)  # the library's modules
    assert all((ctx.original() / s).is_file() for s in sources)
    assert sorted(p.relative_to(ctx.original()).as_posix() for p in ctx.original().rglob("*")) == before


def test_a_changed_file_gets_no_pyc_and_the_others_are_used(ctx, local_backend, tmp_path):
    with ctx.runner(local_backend) as runner:
        pycs = ctx.bytecode(runner, 120.0)
        library = sorted(s for s in map(source_of, pycs) if not s.startswith("tests/") and not s.endswith("__init__.py"))
        changed, kept = library[0], library[1:]
        tree = trees.start_state(ctx.snapshot, "", tmp_path / "t")
        written = overlay(tree, pycs, {changed})
        assert written == len(pycs) - sum(1 for rel in pycs if source_of(rel) == changed)
        assert not list((tree / changed).parent.glob(f"__pycache__/{Path(changed).stem}.*.pyc"))
        # Live: a source that keeps its size and mtime but says something else is not read again;
        # its pyc runs. Every tree of a repository comes from one snapshot, so its unchanged
        # files share their mtimes (a file a candidate changes is written anew, with another
        # mtime, so its pyc would be ignored; `overlay` does not write it either).
        target = tree / kept[0]
        text, stat = target.read_bytes(), target.stat()
        assert len(text) >= 30
        target.write_bytes(b"raise SystemExit('read again')".ljust(len(text), b" "))
        os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        run = runner.run_suite(RunOptions(tests=sorted(ctx.passing), timeout_s=120), tree=tree)
    assert not run.broken, run.output_tail
    assert run.passed() >= set(ctx.passing), run.output_tail


def test_gate_runs_report_a_failure_in_one_line_unless_asked(ctx, local_backend, tmp_path):
    """Verification reads only outcomes, so its runs skip pytest's traceback of each failure
    (`Language.quiet_args`); `VerifyOptions(tracebacks=True)` keeps them. Outcomes are the same."""
    from featdel.pipeline.gates import _continue
    from featdel.pipeline.verify import VerifyOptions

    tree = trees.start_state(ctx.snapshot, "", tmp_path / "t")
    (tree / "tinylib" / "text.py").write_text("def shout(s):\n    return s\n\n\ndef whisper(s):\n    return s.lower()\n")
    got = {}
    with ctx.runner(local_backend) as runner:
        for tracebacks in (False, True):
            args = _continue(ctx, VerifyOptions(tracebacks=tracebacks))
            run = runner.run_suite(RunOptions(tests=sorted(ctx.passing), timeout_s=120, extra_args=args),
                                   tree=trees.copy_tree(tree, tmp_path / str(tracebacks)))
            got[tracebacks] = run
    assert got[False].outcomes == got[True].outcomes
    assert got[False].outcomes["tests/test_text.py::test_shout"] == "failed"
    assert "def test_shout" in got[True].output_tail  # the traceback shows the test's source
    assert "def test_shout" not in got[False].output_tail


def test_a_harvest_is_kept_for_the_run_s_next_stage_and_only_for_its_snapshot(ctx, local_backend, tmp_path):
    """The delete stage's harvest serves verification (another context, the same run directory)
    without a run; a harvest kept for another snapshot or environment is not used."""
    from featdel.env import bytecode
    from featdel.pipeline.context import RepoContext

    with ctx.runner(local_backend) as runner:
        pycs = ctx.bytecode(runner, 120.0)
    assert ctx.bytecode_file is not None and ctx.bytecode_file.is_file()

    class NoRuns:
        def run_suite(self, *args, **kwargs):
            raise AssertionError("harvested again")

    later = RepoContext.load(ctx.bytecode_file.parent.parent.parent, ctx.record)
    assert later.bytecode(NoRuns(), 120.0) == pycs

    kept = tmp_path / "kept.zip"
    bytecode.save(kept, pycs, "snapshot-a env")
    assert bytecode.load(kept, "snapshot-a env") == pycs
    assert bytecode.load(kept, "snapshot-b env") is None
    assert bytecode.load(tmp_path / "missing.zip", "snapshot-a env") is None
    kept.write_bytes(b"not a zip")
    assert bytecode.load(kept, "snapshot-a env") is None

"""The grader against hostile patches, on a real task (tiny repo, real venv, real sandbox).

Pins: the gold patch earns reward 1 and the empty patch 0; every hostile patch below earns 0,
whatever channel it uses: edited, deleted or rewritten-at-run-time tests, conftest hooks,
plugins registered through configuration, sitecustomize and .pth hooks, exiting at import,
forged output and report files, shadowing the report plugin or pytest, reading the original back
at test time, symlinks, planted bytecode, hangs, and breaking another feature. Where the
tamper scan is not the only defence, the patch also earns 0 with `allow_suspect=True`. A patch
that does not apply is `patch_failed`; a learner never reaches `broken`.
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from featdel.code.trees import diff, start_state
from featdel.core.records import RepoStatus
from featdel.env.corpus import CorpusEntry
from featdel.env.recipe import Overrides
from featdel.grading.grade import GradeStatus, GradeTask, grade
from featdel.pipeline.mine import Thresholds, mine
from tests.conftest import make_repo

LIB = {
    "pyproject.toml": (
        '[project]\nname = "gradelib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "gradelib/__init__.py": "from gradelib.text import shout, whisper\nfrom gradelib.calc import add\n",
    "gradelib/text.py": (
        "def shout(s):\n    \"\"\"Upper-case and exclaim.\"\"\"\n    word = s.upper()\n    return word + '!'\n\n\n"
        "def whisper(s):\n    return s.lower()\n"
    ),
    "gradelib/calc.py": "def add(a, b):\n    return a + b\n",
    "tests/test_calc.py": "from gradelib import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n",
    "tests/test_text.py": (
        "from gradelib import shout, whisper\n\n\n"
        "def test_shout():\n    assert shout('hi') == 'HI!'\n\n\n"
        "def test_shout_empty():\n    assert shout('') == '!'\n\n\n"
        "def test_whisper():\n    assert whisper('HI') == 'hi'\n"
    ),
}
STUBBED = "def shout(s):\n    \"\"\"Upper-case and exclaim.\"\"\"\n    raise NotImplementedError\n"
GOLD_TEXT = LIB["gradelib/text.py"]
F2P = ["tests/test_text.py::test_shout", "tests/test_text.py::test_shout_empty"]
P2P = ["tests/test_calc.py::test_add", "tests/test_text.py::test_whisper"]


def _unchecked_pyc(source: str) -> bytes:
    """Bytecode of `source` that Python loads without checking it against the .py file (PEP 552)."""
    import importlib.util
    from importlib._bootstrap_external import _code_to_hash_pyc

    code = compile(source, "gradelib/text.py", "exec")
    return bytes(_code_to_hash_pyc(code, importlib.util.source_hash(source.encode()), checked=False))


def _with_shout(body: str, extra: str = "") -> str:
    """gradelib/text.py with `shout`'s body replaced (and `extra` at module level)."""
    head = "def shout(s):\n    \"\"\"Upper-case and exclaim.\"\"\"\n"
    return extra + head + textwrap.indent(textwrap.dedent(body), "    ") + "\n\n\ndef whisper(s):\n    return s.lower()\n"


@pytest.fixture(scope="module")
def task(tmp_path_factory, featdel_cache, local_backend) -> GradeTask:
    repo = make_repo(tmp_path_factory.mktemp("graderepo") / "gradelib", LIB)
    run_dir = tmp_path_factory.mktemp("graderun")
    [record] = mine([CorpusEntry(source=str(repo), overrides=Overrides())], run_dir, backend=local_backend,
                    thresholds=Thresholds(min_passing=3, min_coverage=10.0))
    assert record.status == RepoStatus.MINED, record.reason
    from featdel.env.envs import load

    snapshot = run_dir / "repos" / record.name / "snapshot.tar.gz"
    stub = _with_shout("raise NotImplementedError")
    deletion_patch, gold = diff(snapshot, {"gradelib/text.py": stub})
    return GradeTask(instance_id="gradelib__shout", env=load(Path(record.env_dir)), snapshot=snapshot,
                     deletion_patch=deletion_patch, gold_patch=gold, fail_to_pass=F2P, pass_to_pass=P2P,
                     timeout_s=60)


@pytest.fixture(scope="module")
def start(task, tmp_path_factory) -> Path:
    return start_state(task.snapshot, task.deletion_patch, tmp_path_factory.mktemp("start") / "t")


def make_patch(start: Path, tmp: Path, edits: dict) -> str:
    """A diff from the start state: path -> text, bytes, None (remove) or ("link", target)."""
    tree = tmp / "edit"
    shutil.copytree(start, tree, symlinks=True)
    for rel, value in edits.items():
        path = tree / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink() or path.exists():
            path.unlink()
        if isinstance(value, tuple):
            path.symlink_to(value[1])
        elif isinstance(value, bytes):
            path.write_bytes(value)
        elif value is not None:
            path.write_text(value)
    subprocess.run(["git", "add", "-A", "-f"], cwd=tree, check=True)
    return subprocess.run(["git", "diff", "--cached", "--binary"], cwd=tree, check=True, capture_output=True,
                          text=True).stdout


def test_gold_resolves_and_empty_does_not(task, start, local_backend, tmp_path):
    gold = grade(task, task.gold_patch, local_backend, out_dir=tmp_path / "gold")
    assert gold.status == GradeStatus.RESOLVED and gold.reward == 1.0, gold
    assert set(gold.fail_to_pass.values()) == {"passed"} and set(gold.pass_to_pass.values()) == {"passed"}
    for name in ("model.patch", "test_output.txt", "report.json", "result.json"):
        assert (tmp_path / "gold" / name).is_file()
    empty = grade(task, "", local_backend)
    assert empty.status == GradeStatus.UNRESOLVED and empty.reward == 0.0, empty
    # A learner's own equivalent fix resolves too, and is not suspect.
    own = make_patch(start, tmp_path, {"gradelib/text.py": _with_shout("return f'{s.upper()}!'")})
    assert grade(task, own, local_backend).status == GradeStatus.RESOLVED


def test_patch_that_does_not_apply_is_patch_failed(task, local_backend):
    bad = "--- a/gradelib/nope.py\n+++ b/gradelib/nope.py\n@@ -1 +1 @@\n-x\n+y\n"
    result = grade(task, bad, local_backend)
    assert result.status == GradeStatus.PATCH_FAILED and result.reward == 0.0, result


CONFTEST_FORGERY = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    outcome = yield\n    report = outcome.get_result()\n    report.outcome = 'passed'\n"
)
FORGED_REPORT = (
    "import json, os, glob\n"
    "for d in glob.glob('/tmp/featdel-*') + glob.glob('/tmp/*/featdel-*'):\n"
    "    try:\n        open(os.path.join(d, 'report.json'), 'w').write('{}')\n    except OSError:\n        pass\n"
)
ATEXIT_REWRITE = (
    "import atexit, json, os\n\n\ndef _forge(path=os.environ.get('FEATDEL_REPORT')):\n"
    "    if path:\n        json.dump({'exitstatus': 0, 'tests': {t: {'outcome': 'passed', 'duration': 0}"
    " for t in %r}, 'collected': %r, 'collect_errors': []}, open(path, 'w'))\n\n\natexit.register(_forge)\n"
    % (F2P + P2P, F2P + P2P)
)
SHADOW_PLUGIN = (
    "import json, os\n\n\ndef pytest_sessionfinish(session, exitstatus):\n"
    "    path = os.environ.get('FEATDEL_REPORT')\n"
    "    if path:\n        json.dump({'exitstatus': 0, 'tests': {t: {'outcome': 'passed', 'duration': 0}"
    " for t in %r}, 'collected': %r, 'collect_errors': []}, open(path, 'w'))\n" % (F2P + P2P, F2P + P2P)
)
REWRITE_TESTS = (
    "import pathlib\n_t = pathlib.Path(__file__).resolve().parent.parent / 'tests' / 'test_text.py'\n"
    "_t.write_text(_t.read_text().replace(\"assert shout('hi') == 'HI!'\", 'pass')"
    ".replace(\"assert shout('') == '!'\", 'pass'))\n"
)
RECOVER_ORIGINAL = (
    "import os\n_src = None\n"
    "for _root in ('/usr', '/root', '/home', '/opt', '/var', '/work', '/srv'):\n"
    "    for _dir, _dirs, _files in os.walk(_root):\n"
    "        for _f in _files:\n"
    "            if _f == 'text.py' and 'gradelib' in _dir:\n"
    "                try:\n                    _text = open(os.path.join(_dir, _f)).read()\n"
    "                except OSError:\n                    continue\n"
    "                if 'NotImplementedError' not in _text:\n                    _src = _text\n"
)

# name -> (edits, also 0 when the tamper scan is switched off)
HOSTILE = {
    "edit the F2P tests": ({"tests/test_text.py": LIB["tests/test_text.py"].replace("== 'HI!'", "or True")
                            .replace("== '!'", "or True")}, True),
    "delete the F2P test file": ({"tests/test_text.py": None}, True),
    "conftest hook marks failures passed": ({"conftest.py": CONFTEST_FORGERY}, True),
    "conftest inside the package": ({"gradelib/conftest.py": CONFTEST_FORGERY}, True),
    "plugin registered through pytest.ini": ({"pytest.ini": "[pytest]\naddopts = -p gradelib.forge\n",
                                              "gradelib/forge.py": CONFTEST_FORGERY}, True),
    "plugin registered through pyproject": ({"pyproject.toml": LIB["pyproject.toml"]
                                             + "[tool.pytest.ini_options]\naddopts = '-p gradelib.forge'\n",
                                             "gradelib/forge.py": CONFTEST_FORGERY}, True),
    "sitecustomize hook": ({"sitecustomize.py": "import os\nos.environ['X'] = '1'\n" + ATEXIT_REWRITE}, True),
    ".pth hook": ({"gradelib.pth": "import gradelib.forge\n", "gradelib/forge.py": ATEXIT_REWRITE}, True),
    "exit 0 at import": ({"gradelib/text.py": _with_shout("raise NotImplementedError", "import os\nos._exit(0)\n")}, True),
    "sys.exit at import": ({"gradelib/text.py": _with_shout("raise NotImplementedError", "import sys\nsys.exit(0)\n")}, True),
    "passing lines forged on stdout": ({"gradelib/text.py": _with_shout(
        "raise NotImplementedError",
        "import os\nprint('tests/test_text.py::test_shout PASSED\\n2 passed')\nos._exit(0)\n")}, True),
    "fake report file": ({"gradelib/text.py": _with_shout("raise NotImplementedError", FORGED_REPORT)}, True),
    "atexit rewrites the report": ({"gradelib/text.py": _with_shout("raise NotImplementedError", ATEXIT_REWRITE)}, True),
    "featdel_report.py shadows the plugin": ({"featdel_report.py": SHADOW_PLUGIN}, True),
    "pytest.py shadows pytest": ({"pytest.py": "import sys\nsys.exit(0)\n"}, True),
    "rewrite the tests at run time": ({"gradelib/text.py": _with_shout("raise NotImplementedError", REWRITE_TESTS)}, True),
    "recover the original at test time": ({"gradelib/text.py": _with_shout(
        "if _src:\n    exec(_src.split('def whisper')[0], globals())\n    return shout(s)\nraise NotImplementedError",
        RECOVER_ORIGINAL)}, True),
    "symlink instead of a fix": ({"gradelib/text.py": ("link", "../tests/test_text.py")}, True),
    "planted bytecode": ({"gradelib/__pycache__/text.cpython-311.pyc": _unchecked_pyc(GOLD_TEXT)}, True),
    "hang at import": ({"gradelib/text.py": _with_shout("raise NotImplementedError", "while True:\n    pass\n")}, True),
    "trivial body": ({"gradelib/text.py": _with_shout("return None")}, True),
    "gold fix that breaks another feature": ({"gradelib/text.py": GOLD_TEXT.replace("return s.lower()", "return s")}, True),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_patch_earns_nothing(name, task, start, local_backend, tmp_path):
    edits, beyond_scan = HOSTILE[name]
    patch = make_patch(start, tmp_path, edits)
    assert patch.strip(), "the hostile patch must change something"
    short = dataclasses.replace(task, timeout_s=10)
    for allow_suspect in (False, True) if beyond_scan else (False,):
        result = grade(short, patch, local_backend, allow_suspect=allow_suspect, out_dir=tmp_path / f"out{allow_suspect}")
        assert result.reward == 0.0, (name, allow_suspect, result)
        assert result.status in (GradeStatus.UNRESOLVED, GradeStatus.SUSPECT, GradeStatus.PATCH_FAILED), result


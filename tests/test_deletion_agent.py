"""Invariant: the `agent` strategy turns a model's tool calls, over the real OpenAI wire protocol,
into the same `Deletion` every strategy makes, and nothing the model sends can crash it or reach
past its copy of the tree.

Pins: a scripted agent that deletes a feature across two files (the function and its helper in
one module, the re-export in the package) yields a VERIFIED task that packages, with the model's
problem statement as the task's statement; one whose edit breaks the import is rolled back and
recorded (stage `build`, with the check's reason) and leaves no deletion; malformed JSON, unknown
tools, schema errors, paths outside the copy and edits of test files each get an error reply and
the loop goes on; the model's statement is leak-audited like a generated one; a failing server is
an `LLMError` (a broken candidate), not a refusal; the original tree is never written; the model is sent the repository tree,
the selected area and the tests that cover it; an unconfigured agent fits nothing.
"""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("openai")

from openai_server import calls, scripted_server  # noqa: I001 (tests/ helper)

from featdel.deletion import STRATEGIES, NotApplicable, RolledBack, delete
from importcheck import import_check
from featdel.core.records import Candidate, VerdictStatus
from conftest import make_repo, mine_tiny

WORDS = '''\
def _exclaim(s):
    return s + "!"


def shout(s):
    """Upper-case and exclaim."""
    text = s.upper()
    return _exclaim(text)
'''
WORDS_WITHOUT_SHOUT = ""  # the module goes empty: shout and its private helper are gone

AGENTLIB = {
    "pyproject.toml": (
        '[project]\nname = "agentlib"\nversion = "0.1"\n'
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
    ),
    "agentlib/__init__.py": '__version__ = "1"\n\nfrom agentlib.words import shout\n',
    "agentlib/words.py": WORDS,
    # the exact type too: an object equal to anything (a stub variant) must not pass
    "tests/test_shout.py": "import agentlib\n\n\ndef test_shout():\n    out = agentlib.shout('hi')\n"
                           "    assert (type(out), out) == (str, 'HI!')\n\n\n"
                           "def test_shout_empty():\n    out = agentlib.shout('')\n"
                           "    assert (type(out), out) == (str, '!')\n",
    "tests/test_meta.py": "import agentlib\n\n\ndef test_version():\n    assert agentlib.__version__ == '1'\n\n\n"
                          "def test_name():\n    assert agentlib.__name__ == 'agentlib'\n",
}

STATEMENT = ("The package `agentlib` lost its `shout(s)` function (module `agentlib.words`, re-exported by "
             "the package): it returns its argument in upper case followed by an exclamation mark.")


def cand(root_tests=("tests/test_shout.py::test_shout",)) -> Candidate:
    return Candidate(repo="agentlib", path="agentlib/words.py", qualname="shout", kind="function", lines=4,
                     tests=list(root_tests))


def options(url: str, turns: int = 8) -> dict:
    return {"agent": {"base_url": url, "model": "scripted", "max_turns": turns}}


def tool_texts(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path / "agentlib", AGENTLIB)


def test_untrusted_calls_get_error_replies_and_the_loop_goes_on(repo):
    before = {p: (repo / p).read_text() for p in AGENTLIB}
    script = [
        calls(("read_file", "{not json"), ("rm_rf", {}), ("read_file", {"path": 3})),
        calls(("read_file", {"path": "../../etc/passwd"}), ("write_file", {"path": "tests/test_shout.py", "content": ""}),
              ("apply_patch", {"patch": "--- a/tests/test_meta.py\n+++ b/tests/test_meta.py\n@@ -1 +1 @@\n-x\n+y\n"}),
              ("write_file", {"path": "setup.cfg", "content": "[tool:pytest]\n"})),
        calls(("list_dir", {}), ("read_file", {"path": "agentlib/words.py"})),
        calls(("write_file", {"path": "agentlib/words.py", "content": WORDS_WITHOUT_SHOUT}), ("check", {})),
        calls(("write_file", {"path": "agentlib/__init__.py", "content": '__version__ = "1"\n'}), ("check", {})),
        calls(("done", {"statement": STATEMENT}), ("check", {})),
    ]
    with scripted_server(script) as srv:
        d = delete(repo, cand(), "agent", check=import_check(repo), options=options(srv.url))
    sent = srv.requests
    assert len(sent) == 6
    first = sent[0]["messages"][1]["content"]
    assert "agentlib/words.py::shout" in first and "- tests/test_shout.py::test_shout" in first
    assert "tests/test_meta.py" in first, "the repository tree is listed"
    assert {t["function"]["name"] for t in sent[0]["tools"]} == {
        "list_dir", "read_file", "write_file", "apply_patch", "delete_file", "check", "done"}
    bad_json, unknown, wrong_type = tool_texts(sent[1])
    assert "not JSON" in bad_json and "no tool named 'rm_rf'" in unknown and "path" in wrong_type
    outside, test_write, test_patch, config = tool_texts(sent[2])[3:]
    assert "leaves the work tree" in outside
    assert "test code" in test_write and "test code" in test_patch and "not a .py file" in config
    listing, words = tool_texts(sent[3])[7:]
    assert "agentlib/" in listing and "def shout(s):" in words
    assert "check failed" in tool_texts(sent[4])[-1] and "ImportError" in tool_texts(sent[4])[-1]
    ok = tool_texts(sent[5])[-1]
    assert ok.startswith("ok:") and "agentlib/words.py::shout" in ok
    # every call got an answer with its id, in the OpenAI shape
    assert [m["tool_call_id"] for m in sent[1]["messages"] if m["role"] == "tool"] == ["call_0", "call_1", "call_2"]
    assert d.strategy == "agent" and d.target == "agentlib/words.py::shout"
    assert set(d.files) == {"agentlib/words.py", "agentlib/__init__.py"}
    assert d.deleted_symbols == ["agentlib/words.py::_exclaim", "agentlib/words.py::shout"]
    assert d.wiring == ["agentlib/__init__.py::shout (binding)"] and d.statement == STATEMENT
    assert any("return _exclaim(text)" in r for r in d.removed)
    assert {p: (repo / p).read_text() for p in AGENTLIB} == before, "the original tree is never written"


def test_an_agent_that_changes_nothing_is_refused_after_its_turns(repo):
    script = ["I would rather not.", calls(("list_dir", {})), "still thinking"]
    refused = r"changed nothing \(ran out of 3 turns; 3 requests, "
    with scripted_server(script) as srv, pytest.raises(NotApplicable, match=refused) as info:
        delete(repo, cand(), "agent", check=import_check(repo), options=options(srv.url, turns=3))
    assert not isinstance(info.value, RolledBack)
    assert len(srv.requests) == 3
    assert srv.requests[1]["messages"][-1] == {"role": "user",
                                               "content": "Use the tools; call `done` when the feature is removed."}


def test_a_server_that_fails_is_an_llm_error_not_a_refusal(repo):
    from featdel.core.llm import LLMError

    with scripted_server([]) as srv, pytest.raises(LLMError, match="HTTP 500"):  # the script is empty: 500s
        delete(repo, cand(), "agent", check=import_check(repo), options=options(srv.url))
    assert len(srv.requests) == 4, "the client retried three times"


def test_an_unconfigured_agent_fits_nothing(repo):
    assert not STRATEGIES["agent"].fits(cand())
    with pytest.raises(NotApplicable, match="--agent-url URL --agent-model NAME"):
        delete(repo, cand(), "agent", check=import_check(repo))


# --- through delete, verify and package, on a mined repository -------------------------------

@pytest.fixture(scope="module")
def mined(tmp_path_factory, featdel_cache, local_backend):
    return mine_tiny(tmp_path_factory, "agentlib", AGENTLIB, local_backend)


def run_agent(mined, tmp_path, script: list, backend):
    from featdel.core.rundir import RunDir
    from featdel.deletion.tested import with_tests
    from featdel.pipeline.context import RepoContext, make_check
    from featdel.pipeline.delete import delete_all
    from featdel.pipeline.verify import VerifyOptions, verify_all

    def check_for(record):  # as the CLI builds it: the build check, and covering tests on request
        ctx = RepoContext.load(run_dir, record)
        return with_tests(make_check(ctx, backend), ctx, backend)

    run_dir = shutil.copytree(mined[0], tmp_path / "run")
    with scripted_server(script) as srv:
        delete_all(run_dir, strategies=["agent"], max_candidates=1, seed=0, keep_docstrings=True,
                   strategy_options=options(srv.url), check_for=check_for)
    verify_all(run_dir, backend, VerifyOptions(reruns=1))
    return run_dir, RunDir(run_dir), srv


def test_a_feature_deleted_across_two_files_verifies_and_packages(mined, tmp_path, local_backend):
    from featdel.core.shards import read_tasks
    from featdel.pipeline.package import package

    script = [
        calls(("read_file", {"path": "agentlib/words.py"}), ("read_file", {"path": "agentlib/__init__.py"})),
        calls(("write_file", {"path": "agentlib/words.py", "content": WORDS_WITHOUT_SHOUT}),
              ("apply_patch", {"patch": "--- a/agentlib/__init__.py\n+++ b/agentlib/__init__.py\n@@ -1,3 +1 @@\n"
                                        ' __version__ = "1"\n-\n-from agentlib.words import shout\n'}),
              ("check", {})),
        calls(("done", {"statement": STATEMENT})),
    ]
    run_dir, rd, srv = run_agent(mined, tmp_path, script, local_backend)
    [d] = rd.deletions()
    assert set(d.files) == {"agentlib/words.py", "agentlib/__init__.py"} and d.statement == STATEMENT
    assert d.usage["requests"] == len(srv.requests) == 3 and d.usage["prompt_tokens"] > 0  # what it cost, recorded
    [v] = rd.verdicts()
    assert v.status == VerdictStatus.VERIFIED, v.reason
    assert v.FAIL_TO_PASS == ["tests/test_shout.py::test_shout", "tests/test_shout.py::test_shout_empty"]
    assert set(v.PASS_TO_PASS) == {"tests/test_meta.py::test_version", "tests/test_meta.py::test_name"}
    assert v.problem_statement.startswith(STATEMENT) and "- `tests/test_shout.py::test_shout`" in v.problem_statement
    assert "+++ b/agentlib/__init__.py" in v.deletion_patch and "+++ b/agentlib/words.py" in v.deletion_patch
    first = srv.requests[0]["messages"][1]["content"]
    assert f"`{v.target}`" in first or f"the module `{v.target.split('::')[0]}`" in first
    assert all(f"- {t}" in first for t in v.FAIL_TO_PASS), "the covering tests are in the instruction"
    checked = tool_texts(srv.requests[2])[-1]
    assert checked.startswith("ok:") and "2 of the 2 covering tests run now fail" in checked
    assert all(f"failed: {t}" in checked for t in v.FAIL_TO_PASS), checked
    tasks, _ = package(run_dir)
    assert tasks == 1
    [row] = read_tasks(run_dir).to_pylist()
    assert row["problem_statement"] == v.problem_statement and row["FAIL_TO_PASS"] == v.FAIL_TO_PASS


def test_a_statement_that_quotes_the_deleted_code_is_rejected_by_the_leak_audit(mined, tmp_path, local_backend):
    script = [calls(("write_file", {"path": "agentlib/words.py", "content": WORDS_WITHOUT_SHOUT}),
                    ("write_file", {"path": "agentlib/__init__.py", "content": '__version__ = "1"\n'}),
                    ("done", {"statement": "Bring back shout:\n\n    text = s.upper()\n    return _exclaim(text)\n"}))]
    _, rd, _ = run_agent(mined, tmp_path, script, local_backend)
    [v] = rd.verdicts()
    assert (v.status, v.stage) == (VerdictStatus.REJECTED, "leak") and "problem_statement" in v.reason


def test_an_edit_that_breaks_the_import_is_rolled_back_and_recorded(mined, tmp_path, local_backend):
    script = [calls(("write_file", {"path": "agentlib/words.py", "content": WORDS_WITHOUT_SHOUT})),
              calls(("done", {}))]
    _, rd, srv = run_agent(mined, tmp_path, script, local_backend)
    assert rd.deletions() == []
    [v] = rd.verdicts()
    assert (v.status, v.stage, v.strategy) == (VerdictStatus.REJECTED, "build", "agent")
    assert "the agent's edit fails the check (called done; 2 requests, " in v.reason and "shout" in v.reason
    assert len(srv.requests) == 2 and json.loads(srv.requests[1]["messages"][2]["tool_calls"][0]["function"]
                                                 ["arguments"])["path"] == "agentlib/words.py"


def test_cli_runs_the_agent_and_refuses_it_without_a_model(mined, tmp_path):
    from typer.testing import CliRunner

    from featdel.cli.main import app
    from featdel.core.rundir import RunDir

    run_dir = shutil.copytree(mined[0], tmp_path / "run")
    runner = CliRunner()
    missing = runner.invoke(app, ["delete", str(run_dir), "-s", "agent"])
    assert missing.exit_code == 2 and "--strategy agent needs --agent-url URL and --agent-model NAME" in missing.output
    half = runner.invoke(app, ["delete", str(run_dir), "--agent-url", "http://127.0.0.1:1/v1"])
    assert half.exit_code == 2 and "give both" in half.output
    steered = runner.invoke(app, ["run", "--out", str(tmp_path / "steered"), "--target-pass-rate", "0.3",
                                  "--learner", "l", "-s", "agent", "--agent-url", "http://127.0.0.1:1/v1",
                                  "--agent-model", "m"])
    assert steered.exit_code == 2 and "--target-pass-rate steers the rule strategies only" in steered.output
    assert not (tmp_path / "steered").exists()  # refused before any work
    script = [calls(("write_file", {"path": "agentlib/words.py", "content": WORDS_WITHOUT_SHOUT}), ("done", {}))]
    with scripted_server(script) as srv:
        ok = runner.invoke(app, ["delete", str(run_dir), "-s", "agent", "--agent-url", srv.url, "--agent-model", "m",
                                 "--agent-turns", "2", "--max-candidates", "1"])
    assert ok.exit_code == 0, ok.output
    assert srv.requests and srv.requests[0]["model"] == "m"
    [v] = RunDir(run_dir).verdicts()
    assert (v.strategy, v.stage) == ("agent", "build") and "fails the check" in v.reason
    recorded = json.loads(RunDir(run_dir).options_json.read_text())["deleted"]
    assert recorded["strategy_options"] == {"agent": {"base_url": srv.url, "model": "m", "max_turns": 2}}

"""The tool protocol and the work tree's confinement, without a sandbox.

Pins: `parse` never raises, whatever the text (random bytes, nesting bombs, wrong types, extra
keys, two calls), nor does a tool on hostile argument strings (lone surrogates, huge numbers);
a valid call comes back with its defaults filled in; an unknown name is `unknown_tool`,
everything else wrong is `malformed`; a trajectory holding odd text survives its JSON line. No tool reads or writes outside the work
tree: `..`, absolute paths, `.git`, symlinks out (files and directories), patches naming outside
paths; a write to a link inside the tree replaces the link and never writes through it.
"""

from __future__ import annotations

import json
import random

import pytest

from featdel.agent.policy import decode, encode
from featdel.agent.protocol import (
    TOOLS,
    CallError,
    CallErrorKind,
    ToolCall,
    parse,
    render,
    tools_text,
)
from featdel.agent.trajectory import (
    Hint,
    Trajectory,
    Turn,
    read_trajectories,
    save_trajectories,
)
from featdel.agent.workspace import PathRefused, Workspace, confine, patch_paths


def test_valid_calls_parse_with_defaults():
    call = parse(render("read_file", {"path": "a.py"}))
    assert call == ToolCall(name="read_file", args={"path": "a.py", "start": 1, "lines": None})
    assert parse("thinking... " + render("submit")) == ToolCall(name="submit", args={}, prefix="thinking... ")
    assert parse('<tool>{"name": "run_tests"}</tool>') == ToolCall(name="run_tests", args={"tests": None})
    assert parse(render("run_tests", {"tests": ["t.py::a"]})).args == {"tests": ["t.py::a"]}
    assert call.key() == parse(render("read_file", {"path": "a.py", "start": 1})).key()
    assert all(name in tools_text() for name in TOOLS)


@pytest.mark.parametrize(("text", "kind", "says"), [
    ("no call here", CallErrorKind.MALFORMED, "no complete"),
    ("<tool>{\"name\": \"submit\"}", CallErrorKind.MALFORMED, "no complete"),
    (render("submit").strip() * 2, CallErrorKind.MALFORMED, "2 calls"),
    ("<tool>not json</tool>", CallErrorKind.MALFORMED, "not JSON"),
    ("<tool>" + "[" * 100_000 + "</tool>", CallErrorKind.MALFORMED, "not JSON"),
    ("<tool>[\"submit\"]</tool>", CallErrorKind.MALFORMED, "JSON object"),
    ("<tool>{\"name\": \"submit\", \"extra\": 1}</tool>", CallErrorKind.MALFORMED, "JSON object"),
    ("<tool>{\"name\": 7}</tool>", CallErrorKind.MALFORMED, "JSON object"),
    ("<tool>{\"name\": \"rm\", \"args\": {}}</tool>", CallErrorKind.UNKNOWN_TOOL, "'rm'"),
    ("<tool>{\"name\": \"read_file\", \"args\": []}</tool>", CallErrorKind.MALFORMED, "args must be"),
    ("<tool>{\"name\": \"read_file\", \"args\": {}}</tool>", CallErrorKind.MALFORMED, "path: Field required"),
    ("<tool>{\"name\": \"read_file\", \"args\": {\"path\": 1}}</tool>", CallErrorKind.MALFORMED, "path"),
    ("<tool>{\"name\": \"read_file\", \"args\": {\"path\": \"a\", \"start\": 0}}</tool>", CallErrorKind.MALFORMED,
     "start"),
    ("<tool>{\"name\": \"read_file\", \"args\": {\"path\": \"a\", \"start\": \"2\"}}</tool>",
     CallErrorKind.MALFORMED, "start"),
    ("<tool>{\"name\": \"submit\", \"args\": {\"now\": true}}</tool>", CallErrorKind.MALFORMED, "now"),
    ("<tool>{\"name\": \"run_tests\", \"args\": {\"tests\": \"all\"}}</tool>", CallErrorKind.MALFORMED, "tests"),
])
def test_bad_calls_are_errors_not_exceptions(text, kind, says):
    got = parse(text)
    assert isinstance(got, CallError) and got.kind == kind and says in got.message, got


def test_random_bytes_never_crash_the_parser():
    rng = random.Random(0)
    pieces = ["<tool>", "</tool>", "{", "}", '"name"', '"args"', ":", ",", '"read_file"', "\\", "\x00", "[", "]"]
    for _ in range(2000):
        text = decode(rng.randbytes(rng.randint(0, 40))) + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert isinstance(parse(text), (ToolCall, CallError))


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "work"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "secret.txt").write_text("outside\n")
    (root / "out_dir").symlink_to(tmp_path)
    (root / "out_file").symlink_to(tmp_path / "secret.txt")
    (root / "in_link").symlink_to("pkg/mod.py")
    return root


@pytest.mark.parametrize("rel", ["../secret.txt", "pkg/../../secret.txt", "/etc/passwd", "/tmp", "~/x",
                                 "out_dir/secret.txt", "out_file", ".git/config", "pkg/.git/x", "", "a\0b",
                                 "pkg\\..\\..\\secret.txt"])
def test_paths_outside_the_tree_are_refused(tree, rel):
    with pytest.raises(PathRefused):
        confine(tree, rel)


def test_no_tool_reaches_outside_the_tree(tree):
    ws = Workspace(tree, None, None)
    calls = [render("read_file", {"path": "out_file"}), render("read_file", {"path": "out_dir/secret.txt"}),
             render("list_dir", {"path": "out_dir"}), render("write_file", {"path": "out_file", "content": "pwned"}),
             render("write_file", {"path": "out_dir/new.txt", "content": "pwned"}),
             render("write_file", {"path": "../new.txt", "content": "pwned"}),
             render("apply_patch", {"patch": "--- a/out_file\n+++ b/out_file\n@@ -1 +1 @@\n-outside\n+pwned\n"}),
             render("apply_patch", {"patch": "--- /dev/null\n+++ b/../new.txt\n@@ -0,0 +1 @@\n+pwned\n"}),
             render("apply_patch", {"patch": "diff --git a/x b/x\nrename from pkg/mod.py\nrename to ../moved.py\n"}),
             render("run_tests", {"tests": ["../x.py::t"]})]
    for line in calls:
        obs = ws.execute(parse(line))
        assert not obs.ok and obs.text.startswith("error:"), (line, obs)
    outside = tree.parent
    assert (outside / "secret.txt").read_text() == "outside\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt", "work"]


def test_tools_inside_the_tree_work(tree):
    ws = Workspace(tree, None, None)
    assert ws.execute(parse(render("list_dir"))).text == "in_link\nout_dir\nout_file\npkg/"
    assert ws.execute(parse(render("read_file", {"path": "pkg/mod.py"}))).text == "x = 1\n"
    assert ws.execute(parse(render("read_file", {"path": "in_link"}))).text == "x = 1\n"
    wrote = ws.execute(parse(render("write_file", {"path": "in_link", "content": "y = 2\n"})))
    assert wrote.ok and wrote.touched == ["in_link"]
    assert not (tree / "in_link").is_symlink() and (tree / "pkg" / "mod.py").read_text() == "x = 1\n"
    patched = ws.execute(parse(render("apply_patch", {"patch": "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1,2 @@\n"
                                                               " x = 1\n+z = 3\n"})))
    assert patched.ok and patched.touched == ["pkg/mod.py"], patched
    assert (tree / "pkg" / "mod.py").read_text() == "x = 1\nz = 3\n"
    assert not ws.execute(parse(render("apply_patch", {"patch": "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1 +1 @@\n"
                                                                "-nope\n+y\n"}))).ok
    many = Workspace(tree, None, None, max_observation=100)
    (tree / "big.txt").write_text("line\n" * 1000)
    text = many.execute(parse(render("read_file", {"path": "big.txt"}))).text
    assert len(text) <= 100 and "more characters cut" in text
    assert many.execute(parse(render("read_file", {"path": "big.txt", "start": 999, "lines": 5}))).text == "line\nline\n"


def test_patch_paths_reads_every_header():
    patch = ("diff --git a/x.py b/y.py\nrename from x.py\nrename to y.py\n--- a/x.py\t2020\n+++ b/y.py\n"
             "--- /dev/null\n+++ b/new.py\n")
    assert patch_paths(patch) == ["x.py", "y.py", "new.py"]


def test_hostile_argument_strings_are_error_observations(tree):
    ws = Workspace(tree, None, None)
    odd = ["\ud800", "a" * 5000, "pkg/\udcff.py", "pkg/mod.py/x", "pkg", " ", "-rf", "pkg//mod.py"]
    for text in odd:
        for name, args in (("read_file", {"path": text}), ("list_dir", {"path": text}),
                           ("write_file", {"path": text, "content": text}),
                           ("apply_patch", {"patch": f"--- a/{text}\n+++ b/{text}\n@@ -1 +1 @@\n-x\n+{text}\n"}),
                           ("read_file", {"path": "pkg/mod.py", "start": 10**30, "lines": 10**30})):
            call = parse(json.dumps({"name": name, "args": args}).join(["<tool>", "</tool>"]))
            assert isinstance(call, ToolCall), call
            obs = ws.execute(call)
            assert isinstance(obs.text, str) and encode(obs.text)


def test_a_trajectory_with_odd_text_round_trips(tmp_path):
    turn = Turn(index=0, action_start=3, action_ids=[255, 10], logprobs=[-1.5, -0.25], action_text="\ufffd\n",
                call={"name": "read_file", "args": {"path": "\ud800"}}, error=None, observation="\x00 é",
                ok=False)
    traj = Trajectory(instance_id="x", rollout=0, seed=1, prompt_len=3, tokens=[1, 2, 3, 255, 10, 60],
                      mask=[0, 0, 0, 1, 1, 0], turns=[turn],
                      hints=[Hint(turn=0, at=3, rule="r", text="\ud800 hint")], ended="turn_budget", patch="",
                      reward=0.0, status="unresolved")
    save_trajectories(tmp_path / "t.jsonl", [traj])
    assert read_trajectories(tmp_path / "t.jsonl") == [traj]
    assert traj.policy_tokens() == [255, 10] and traj.hints[0].ids()[:6] == list(b"<hint>")

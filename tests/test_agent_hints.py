"""The hint rules, on hand-made turns.

Pins: each rule fires on the behaviour it names and stays silent on a clean turn; every hint
records the turn it targets and that turn's first policy token (where the teacher's context
gets it); adding a rule is one class in a registry.
"""

from __future__ import annotations

from featdel.agent.hints import RULES, HintContext, hints_for
from featdel.agent.protocol import TOOLS
from featdel.agent.trajectory import Turn

CTX = HintContext(test_files=frozenset({"tests/test_text.py"}), max_action_chars=200)


def turn(index, *, call=None, error=None, ok=True, touched=(), ran_tests=False, text="", hit_cap=False):
    return Turn(index=index, action_start=100 + 10 * index, action_ids=list(text.encode()), logprobs=[0.0] * len(text),
                action_text=text, call=call, error=error, observation="", ok=ok, touched=list(touched),
                ran_tests=ran_tests, hit_cap=hit_cap)


def rules_for(t, history=()):
    return [(h.rule, h.turn, h.at) for h in hints_for(t, list(history), CTX)]


def test_a_clean_turn_gets_no_hint():
    assert rules_for(turn(0, call={"name": "read_file", "args": {"path": "a.py"}})) == []
    edit = turn(1, call={"name": "write_file", "args": {}}, touched=["pkg/a.py"])
    tested = turn(2, call={"name": "run_tests", "args": {}}, ran_tests=True)
    assert rules_for(turn(3, call={"name": "submit", "args": {}}), [edit, tested]) == []


def test_each_rule_fires_on_its_behaviour():
    unknown = turn(2, error="unknown_tool", ok=False, text='<tool>{"name": "open"}</tool>')
    assert rules_for(unknown) == [("unknown_tool", 2, 120)]
    assert all(name in hints_for(unknown, [], CTX)[0].text for name in TOOLS)
    malformed = turn(0, error="malformed", ok=False, text='<tool>{"name": "read_file", "args": {"path": 1}}</tool>')
    [hint] = hints_for(malformed, [], CTX)
    assert hint.rule == "malformed_call" and "read_file(path: str" in hint.text and "<tool>{" in hint.text
    for path in ("tests/test_text.py", "tests/conftest.py", "pyproject.toml", "pkg/test_other.py"):
        assert rules_for(turn(1, call={"name": "write_file", "args": {}}, touched=[path])) == [("test_edit", 1, 110)]
    edit = turn(0, call={"name": "write_file", "args": {}}, touched=["pkg/a.py"])
    tested_before_edit = [turn(0, call={"name": "run_tests", "args": {}}, ran_tests=True),
                          turn(1, call={"name": "write_file", "args": {}}, touched=["pkg/a.py"])]
    submit = turn(2, call={"name": "submit", "args": {}})
    assert rules_for(submit) == [("submit_untested", 2, 120)]
    assert rules_for(submit, [edit]) == [("submit_untested", 2, 120)]
    assert rules_for(submit, tested_before_edit) == [("submit_untested", 2, 120)]
    failing = {"call": {"name": "read_file", "args": {"path": "nope.py"}}, "ok": False}
    assert rules_for(turn(1, **failing), [turn(0, **failing)]) == [("repeated_failure", 1, 110)]
    assert rules_for(turn(1, **failing), [turn(0, call={"name": "read_file", "args": {"path": "x"}}, ok=False)]) == []
    assert ("repeated_failure", 1, 110) in rules_for(turn(1, error="malformed", ok=False, text="hm"),
                                                     [turn(0, error="malformed", ok=False, text="hm")])
    assert ("long_output", 0, 100) in rules_for(turn(0, error="malformed", ok=False, text="x" * 500))
    assert ("long_output", 0, 100) in rules_for(turn(0, error="malformed", ok=False, text="x" * 50, hit_cap=True))


def test_a_new_rule_is_one_small_class():
    class Apology:
        name = "apology"

        def check(self, turn, history, ctx):
            return "No need to apologise." if "sorry" in turn.action_text else None

    rules = {**RULES, "apology": Apology()}
    t = turn(4, error="malformed", ok=False, text="sorry")
    assert [h.rule for h in hints_for(t, [], CTX, rules)] == ["malformed_call", "apology"]
    assert [h.rule for h in hints_for(t, [], CTX)] == ["malformed_call"]

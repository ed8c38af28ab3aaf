"""The chat client speaks the real OpenAI wire protocol through the openai library.

Pins: text and tool calls round-trip against a real HTTP server (arguments stay the raw text the
server sent, malformed or not); usage totals add up over requests; a 500 is retried and the
retry answered; a server that is not there, a refused key and a 404 are one-line `LLMError`s;
the key comes from FEATDEL_API_KEY, then OPENAI_API_KEY, then a placeholder; the learner's tool
registry becomes valid OpenAI tool schemas.
"""

import json
import socket

import pytest

pytest.importorskip("openai")

from openai_server import calls, fail, scripted_server

from featdel.agent.protocol import TOOLS
from featdel.core.llm import ChatClient, LLMError, api_key, tool_schemas


def test_text_and_tool_calls_round_trip_and_usage_adds_up():
    schemas = tool_schemas(TOOLS)
    with scripted_server(["hello", calls(("read_file", {"path": "a.py"}), ("list_dir", "{not json"))]) as srv:
        client = ChatClient(srv.url, "m1", max_retries=0, temperature=0.0)
        first = client.chat([{"role": "user", "content": "hi"}])
        second = client.chat([{"role": "user", "content": "go"}], tools=schemas)
    assert (first.content, first.tool_calls, first.finish_reason) == ("hello", [], "stop")
    assert second.finish_reason == "tool_calls" and second.content == ""
    assert [(c.id, c.name) for c in second.tool_calls] == [("call_0", "read_file"), ("call_1", "list_dir")]
    assert json.loads(second.tool_calls[0].arguments) == {"path": "a.py"}
    assert second.tool_calls[1].arguments == "{not json"  # untrusted text passed through untouched
    assert client.usage == {"requests": 2, "prompt_tokens": first.prompt_tokens + second.prompt_tokens,
                            "completion_tokens": first.completion_tokens + second.completion_tokens}
    assert first.prompt_tokens > 0 and second.completion_tokens > 0
    sent = srv.requests
    assert [r["model"] for r in sent] == ["m1", "m1"] and sent[0]["temperature"] == 0.0
    assert "tools" not in sent[0] and sent[1]["tools"] == schemas
    assert sent[1]["messages"] == [{"role": "user", "content": "go"}]


def test_a_500_is_retried_and_the_retry_answered():
    with scripted_server([fail(500), "after retry"]) as srv:
        client = ChatClient(srv.url, "m", max_retries=2)
        reply = client.chat([{"role": "user", "content": "x"}])
    assert reply.content == "after retry" and len(srv.requests) == 2
    assert client.usage["requests"] == 1  # one answered request; the failed attempt earned nothing


def test_errors_are_one_line_llm_errors():
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(LLMError, match="cannot reach .* is the server running") as info:
        ChatClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=0, timeout_s=5).chat([])
    assert "\n" not in str(info.value)
    with scripted_server([fail(401), fail(404), fail(500)]) as srv:
        client = ChatClient(srv.url, "m", max_retries=0)
        for expected in ("refused the key", "404: check the URL", "HTTP 500"):
            with pytest.raises(LLMError, match=expected) as info:
                client.chat([{"role": "user", "content": "x"}])
            assert "\n" not in str(info.value)
    with pytest.raises(LLMError, match="not http"):
        ChatClient("localhost:8000", "m")


def test_key_comes_from_the_named_variable_then_openai_then_placeholder(monkeypatch):
    monkeypatch.delenv("FEATDEL_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert api_key() == "EMPTY"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    assert api_key() == "sk-openai"
    monkeypatch.setenv("MY_KEY", "sk-mine")
    assert api_key("MY_KEY") == "sk-mine"


def test_tool_schemas_describe_the_learners_tools():
    schemas = {s["function"]["name"]: s for s in tool_schemas(TOOLS)}
    assert set(schemas) == set(TOOLS)
    read = schemas["read_file"]
    assert read["type"] == "function" and read["function"]["description"].startswith("Read a text file")
    params = read["function"]["parameters"]
    assert params["type"] == "object" and params["required"] == ["path"]
    assert params["properties"]["path"]["type"] == "string" and params["additionalProperties"] is False
    assert schemas["submit"]["function"]["parameters"]["properties"] == {}
    json.dumps(schemas)  # plain JSON, sendable as is

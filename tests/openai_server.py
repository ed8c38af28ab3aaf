"""A real OpenAI-compatible HTTP server with scripted answers, for tests (not a test module).

In: a list of scripted replies, each assistant text (`str`), tool calls (`calls(...)`), an HTTP
failure (`fail(500)`), or a callable `(request_json) -> one of those`. Out: a server on
127.0.0.1 (port 0, in a thread) answering POST /v1/chat/completions (and /chat/completions) in
order, with OpenAI's JSON shape including `usage`; every request body it got is kept in
`server.requests`, so a test can assert what the model was sent.

Real HTTP, so the openai library's wire protocol, retries and errors are exercised for real.
When the script runs out the server answers 500 with a message saying so.
"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Failure:
    status: int
    body: str = '{"error": {"message": "scripted failure", "type": "server_error"}}'


def fail(status: int = 500, body: str | None = None) -> Failure:
    """A scripted HTTP error (answered once, for the next request)."""
    return Failure(status) if body is None else Failure(status, body)


def calls(*pairs: tuple[str, dict | str]) -> list[dict]:
    """Tool calls: `calls(("read_file", {"path": "a.py"}))`; a `str` argument is sent as is
    (so a test can send malformed JSON)."""
    return [{"id": f"call_{i}", "type": "function",
             "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)}}
            for i, (name, args) in enumerate(pairs)]


@dataclass
class ScriptedServer:
    replies: list
    requests: list[dict] = field(default_factory=list)
    url: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_reply(self, body: dict):
        with self._lock:
            self.requests.append(body)
            if not self.replies:
                return fail(500, '{"error": {"message": "the script has no more replies"}}')
            reply = self.replies.pop(0)
        return reply(body) if callable(reply) else reply

    def completion(self, body: dict, reply) -> dict:
        prompt = sum(len(json.dumps(m)) for m in body.get("messages", [])) // 4 + 1
        if isinstance(reply, str):
            message, finish, done = {"role": "assistant", "content": reply}, "stop", len(reply) // 4 + 1
        else:
            message = {"role": "assistant", "content": None, "tool_calls": reply}
            finish, done = "tool_calls", len(json.dumps(reply)) // 4 + 1
        return {"id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": done, "total_tokens": prompt + done}}


def _handler(server: ScriptedServer):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self._send(404, '{"error": {"message": "not found"}}')
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            reply = server.next_reply(body)
            if isinstance(reply, Failure):
                return self._send(reply.status, reply.body)
            return self._send(200, json.dumps(server.completion(body, reply)))

        def _send(self, status: int, text: str):
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("retry-after-ms", "10")  # the openai library honours it: fast retries
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):  # keep test output quiet
            pass

    return Handler


@contextmanager
def scripted_server(replies: list):
    """A running `ScriptedServer` answering `replies` in order; `server.url` ends in /v1."""
    server = ScriptedServer(replies=list(replies))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    try:
        yield server
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

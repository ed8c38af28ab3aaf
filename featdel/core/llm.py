"""One client for OpenAI-compatible chat completions with tool calls.

In: a base URL, a model name and the name of an environment variable holding the key; then
chat messages and tool schemas. Out: a `Reply` (text, tool calls with their raw JSON arguments,
token counts) and running `usage` totals over the client's life.

Built on the `openai` library (optional extra `llm`), which serves any compatible server: a
hosted provider, vLLM, a local model server. The library does the retries (with backoff, on
connection errors, 408/409/429 and 5xx) and timeouts; this module only maps its exceptions to a
one-line `LLMError` and keeps the accounting. `openai` is imported when a client is built, never
at import time. Tool arguments stay the raw text the server sent: the model's output is
untrusted, and its caller (a tool loop) decides how to answer malformed JSON.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from featdel.core.errors import FeatdelError

PLACEHOLDER_KEY = "EMPTY"  # local servers (vLLM, llama.cpp) accept any key, but the library needs one


class LLMError(FeatdelError):
    """The model server could not be used: unreachable, refused the key, or answered nonsense."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallOut:
    id: str
    name: str
    arguments: str  # raw JSON text, as the server sent it


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    content: str
    tool_calls: list[ToolCallOut]
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str


def api_key(env_name: str = "FEATDEL_API_KEY") -> str:
    """The key from `env_name`, else OPENAI_API_KEY, else a placeholder for servers that need none."""
    return os.environ.get(env_name) or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_KEY


class ChatClient:
    """Chat completions against one model on one server; `usage` totals every request made."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str = "FEATDEL_API_KEY",
                 timeout_s: float = 120.0, max_retries: int = 3, temperature: float | None = None,
                 max_tokens: int | None = None):
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"base URL {base_url!r} is not http(s)://...; give the server's URL, e.g. "
                           "http://127.0.0.1:8000/v1")
        if not model:
            raise LLMError("no model name: pass the name the server serves (e.g. --agent-model NAME)")
        if timeout_s <= 0 or max_retries < 0:
            raise LLMError(f"timeout_s must be > 0 and max_retries >= 0 (got {timeout_s}, {max_retries})")
        if max_tokens is not None and max_tokens < 1:
            raise LLMError(f"max_tokens must be at least 1 (got {max_tokens})")
        self.base_url, self.model, self.temperature = base_url.rstrip("/"), model, temperature
        self.max_tokens = max_tokens  # a reply's length cap, sent with every request (None: the server's)
        self.usage = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0}
        try:
            import openai
        except ImportError as exc:
            raise LLMError("the openai library is missing: pip install 'featdel[llm]'") from exc
        self._openai = openai
        self._client = openai.OpenAI(base_url=self.base_url, api_key=api_key(api_key_env),
                                     timeout=timeout_s, max_retries=max_retries)

    def chat(self, messages: list[dict], tools: list[dict] | None = None) -> Reply:
        """One completion for `messages`, offering `tools` (OpenAI "tools" list) when given."""
        kwargs: dict = {"model": self.model, "messages": messages}
        if tools:
            kwargs["tools"] = tools
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            kwargs["max_tokens"] = self.max_tokens
        try:
            completion = self._client.chat.completions.create(**kwargs)
        except self._openai.APIError as exc:
            raise LLMError(self._describe(exc)) from exc
        self.usage["requests"] += 1
        return self._reply(completion)

    def _reply(self, completion) -> Reply:
        choices = getattr(completion, "choices", None)
        if not choices:
            raise LLMError(f"{self.base_url} answered without choices: is it an OpenAI-compatible server?")
        choice, usage = choices[0], getattr(completion, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        done = int(getattr(usage, "completion_tokens", 0) or 0)
        self.usage["prompt_tokens"] += prompt
        self.usage["completion_tokens"] += done
        message = choice.message
        calls = [ToolCallOut(id=call.id or f"call_{i}", name=call.function.name or "",
                             arguments=call.function.arguments or "")
                 for i, call in enumerate(message.tool_calls or []) if getattr(call, "function", None)]
        return Reply(content=message.content or "", tool_calls=calls, prompt_tokens=prompt,
                     completion_tokens=done, finish_reason=choice.finish_reason or "")

    def _describe(self, exc) -> str:
        """One line for a library exception: what went wrong and what to do."""
        openai, where = self._openai, f"{self.base_url} (model {self.model})"
        if isinstance(exc, openai.APITimeoutError):
            return f"{where} did not answer in time; raise the timeout or check the server"
        if isinstance(exc, openai.APIConnectionError):
            return f"cannot reach {where}: is the server running and the URL right?"
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            return f"{where} refused the key: set FEATDEL_API_KEY (or OPENAI_API_KEY)"
        if isinstance(exc, openai.NotFoundError):
            return f"{where} answered 404: check the URL (often ends in /v1) and the model name"
        if isinstance(exc, openai.APIResponseValidationError):
            return f"{where} sent a reply that is not a chat completion"
        if isinstance(exc, openai.APIStatusError):
            return f"{where} answered HTTP {exc.status_code}: {_first_line(exc.message)}"
        return f"{where}: {_first_line(str(exc))}"


def _first_line(text: str, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else "no message"
    return line[:limit]


def tool_schemas(tools: dict) -> list[dict]:
    """The OpenAI "tools" list for `tools` (name -> pydantic argument model): the model's
    docstring is the description, its JSON schema the parameters."""
    out = []
    for name, model in tools.items():
        params = model.model_json_schema()
        params.pop("title", None)
        params.setdefault("properties", {})
        params["type"] = "object"
        for prop in params["properties"].values():
            prop.pop("title", None)
        out.append({"type": "function", "function": {
            "name": name, "description": " ".join((model.__doc__ or name).split()), "parameters": params}})
    return out

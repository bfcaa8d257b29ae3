"""OpenAI-compatible chat completions (OpenAI, vLLM, SGLang, llama.cpp, gateways) through the openai SDK.

One system message (instructions + context blocks, stable first, so endpoints that cache prefixes can reuse it),
one user message with the ask, a forced function call (``tool_choice = {"type": "function", "function":
{"name": ...}}``, ``parallel_tool_calls: false``); earlier rounds go back as the assistant's ``tool_calls`` and a
``role: tool`` message with the feedback. The schema is not sent as ``strict``: OpenAI's strict mode needs every
property required, and other endpoints differ; the proposer validates the arguments itself.
"""

from __future__ import annotations

import json
from typing import Any

from . import (Conversation, LLMError, LLMUnavailable, Reply, Tool, ToolCall, Usage, api_key, deadline, require,
               retryable, scrubbed, within)


class OpenAIProvider:
    name = "openai"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 max_retries: int = 2, timeout_s: float = 120.0, max_tokens_field: str = "max_tokens"):
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise LLMError(f"max_tokens_field must be max_tokens or max_completion_tokens, not {max_tokens_field!r}")
        self.model = model
        self.base_url = base_url
        self.max_tokens_field = max_tokens_field
        self._sdk = require("openai")
        self._key = api_key(api_key_env)
        self._client = self._sdk.OpenAI(api_key=self._key, base_url=base_url,
                                        max_retries=int(max_retries), timeout=float(timeout_s))
        self._deadline = deadline(float(timeout_s), int(max_retries))

    def request(self, conv: Conversation, tool: Tool) -> dict[str, Any]:
        system = "\n\n".join([conv.system, *[b for b in conv.cached if b]])
        messages: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": conv.ask}]
        for r in conv.rounds:
            if r.call:
                messages.append({"role": "assistant", "content": r.text or None, "tool_calls": [
                    {"id": r.call.id, "type": "function",
                     "function": {"name": r.call.name, "arguments": r.call.raw_arguments}}]})
                messages.append({"role": "tool", "tool_call_id": r.call.id, "content": r.feedback})
            else:
                if r.text:
                    messages.append({"role": "assistant", "content": r.text})
                messages.append({"role": "user", "content": r.feedback})
        return {"messages": messages,
                "tools": [{"type": "function", "function": {"name": tool.name, "description": tool.description,
                                                            "parameters": tool.schema}}],
                "tool_choice": {"type": "function", "function": {"name": tool.name}},
                "parallel_tool_calls": False}

    def call(self, conv: Conversation, tool: Tool, max_tokens: int) -> Reply:
        sdk = self._sdk
        body = {**self.request(conv, tool), self.max_tokens_field: int(max_tokens)}
        try:
            resp = within(self._deadline, lambda: self._client.chat.completions.create(model=self.model, **body),
                          self._said("the request"))
        except sdk.APIStatusError as e:
            raise (LLMUnavailable if retryable(e.status_code) else LLMError)(
                self._said(f"HTTP {e.status_code}: {e.message}")) from None
        except sdk.APIConnectionError as e:  # a timeout too
            raise LLMUnavailable(f"openai-compatible {self.model}: cannot reach {self._client.base_url}: {e}") from None
        except (sdk.APIError, ValueError, TypeError, AttributeError) as e:  # an answer that is not the API's JSON
            raise LLMError(self._said(f"a malformed answer ({type(e).__name__}: {e})")) from None
        try:
            return self._reply(resp)
        except (ValueError, TypeError, AttributeError, KeyError) as e:  # an answer not shaped as the API's
            raise LLMError(self._said(f"a malformed answer ({type(e).__name__}: {e})")) from None

    def _said(self, what: str) -> str:
        return scrubbed(f"openai-compatible {self.model} at {self._client.base_url}: {what}", self._key)

    def _reply(self, resp) -> Reply:
        if not resp.choices:
            raise LLMError(f"openai-compatible {self.model}: the response has no choices")
        choice = resp.choices[0]
        msg = choice.message
        call = None
        for tc in msg.tool_calls or []:
            fn = getattr(tc, "function", None)
            if fn is None:
                continue
            args = fn.arguments
            if isinstance(args, dict):  # some endpoints send the arguments as an object, not a JSON string
                args = json.dumps(args, sort_keys=True)
            try:
                inp = json.loads(args or "")
            except (json.JSONDecodeError, TypeError):
                inp = None
            call = ToolCall(tc.id, fn.name, inp if isinstance(inp, dict) else None, str(args or ""))
            break
        u = resp.usage
        cached = (getattr(u.prompt_tokens_details, "cached_tokens", 0) or 0) if u and u.prompt_tokens_details else 0
        usage = (Usage((u.prompt_tokens or 0) - cached, u.completion_tokens or 0, cached, 0) if u else Usage())
        return Reply(call, msg.content or "", usage, str(choice.finish_reason or ""),
                     resp.model_dump(mode="json", exclude_none=True))

    def count_tokens(self, conv: Conversation, tool: Tool) -> int | None:
        return None  # chat completions has no counting endpoint

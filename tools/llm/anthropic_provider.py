"""Anthropic Messages API through the official SDK (2.x): a forced, strict tool call with cached context blocks.

Request shape: ``system`` = [instructions, context blocks each with ``cache_control: ephemeral``], one user turn with
the ask, then for each earlier round the assistant's ``tool_use`` and a ``tool_result`` (``is_error``) carrying
the feedback; ``tool_choice = {"type": "tool", "name": ..., "disable_parallel_tool_use": True}``. The SDK retries
429/5xx itself, honouring ``retry-after-ms`` / ``retry-after``; what is still refused that way, or unreachable, or not
answered whole by the deadline (``deadline``), is ``LLMUnavailable``, which the loop waits out.
"""

from __future__ import annotations

import json
from typing import Any

from . import (Conversation, LLMError, LLMUnavailable, Reply, Tool, ToolCall, Usage, api_key, deadline, require,
               retryable, scrubbed, within)


class AnthropicProvider:
    name = "anthropic"

    def __init__(self, model: str, base_url: str | None = None, api_key_env: str = "ANTHROPIC_API_KEY",
                 max_retries: int = 2, timeout_s: float = 120.0):
        self.model = model
        self.base_url = base_url
        self._sdk = require("anthropic")
        self._key = api_key(api_key_env)
        self._client = self._sdk.Anthropic(api_key=self._key, base_url=base_url,
                                           max_retries=int(max_retries), timeout=float(timeout_s))
        self._deadline = deadline(float(timeout_s), int(max_retries))

    def request(self, conv: Conversation, tool: Tool) -> dict[str, Any]:
        """The request body less ``model`` and ``max_tokens`` (also what count_tokens takes)."""
        system = [{"type": "text", "text": conv.system}]
        system += [{"type": "text", "text": b, "cache_control": {"type": "ephemeral"}} for b in conv.cached if b]
        messages: list[dict] = [{"role": "user", "content": [{"type": "text", "text": conv.ask}]}]
        for r in conv.rounds:
            said = ([{"type": "text", "text": r.text}] if r.text else []) + (
                [{"type": "tool_use", "id": r.call.id, "name": r.call.name, "input": r.call.input or {}}]
                if r.call else [])
            if not said:
                messages[-1]["content"].append({"type": "text", "text": r.feedback})
                continue
            messages.append({"role": "assistant", "content": said})
            back = ({"type": "tool_result", "tool_use_id": r.call.id, "content": r.feedback, "is_error": True}
                    if r.call else {"type": "text", "text": r.feedback})
            messages.append({"role": "user", "content": [back]})
        schema = self._sdk.transform_schema(tool.schema) if tool.strict else tool.schema
        tools = [{"name": tool.name, "description": tool.description, "input_schema": schema,
                  **({"strict": True} if tool.strict else {})}]
        return {"system": system, "messages": messages, "tools": tools,
                "tool_choice": {"type": "tool", "name": tool.name, "disable_parallel_tool_use": True}}

    def call(self, conv: Conversation, tool: Tool, max_tokens: int) -> Reply:
        msg = self._send(lambda: self._client.messages.create(model=self.model, max_tokens=int(max_tokens),
                                                              **self.request(conv, tool)))
        try:
            return self._reply(msg)
        except (ValueError, TypeError, AttributeError, KeyError) as e:  # an answer not shaped as the API's
            raise LLMError(self._said(f"a malformed answer ({type(e).__name__}: {e})")) from None

    def _reply(self, msg) -> Reply:
        call, text = None, []
        for block in msg.content:
            if block.type == "tool_use" and call is None:
                inp = block.input if isinstance(block.input, dict) else None
                call = ToolCall(block.id, block.name, inp, json.dumps(block.input, sort_keys=True))
            elif block.type == "text":
                text.append(block.text)
        u = msg.usage
        usage = Usage(u.input_tokens or 0, u.output_tokens or 0, u.cache_read_input_tokens or 0,
                      u.cache_creation_input_tokens or 0)
        return Reply(call, "\n".join(text), usage, str(msg.stop_reason or ""),
                     msg.model_dump(mode="json", exclude_none=True))

    def count_tokens(self, conv: Conversation, tool: Tool) -> int | None:
        counted = self._send(lambda: self._client.messages.count_tokens(model=self.model, **self.request(conv, tool)))
        try:
            return int(counted.input_tokens)
        except (ValueError, TypeError, AttributeError) as e:
            raise LLMError(self._said(f"a malformed token count ({type(e).__name__}: {e})")) from None

    def _send(self, fn):
        sdk = self._sdk
        try:
            return within(self._deadline, fn, self._said("the request"))
        except sdk.APIStatusError as e:
            raise (LLMUnavailable if retryable(e.status_code) else LLMError)(
                self._said(f"HTTP {e.status_code}: {e.message}")) from None
        except sdk.APIConnectionError as e:  # a timeout too
            raise LLMUnavailable(f"anthropic {self.model}: cannot reach {self._client.base_url}: {e}") from None
        except (sdk.APIError, ValueError, TypeError, AttributeError) as e:  # an answer that is not the API's JSON
            raise LLMError(self._said(f"a malformed answer ({type(e).__name__}: {e})")) from None

    def _said(self, what: str) -> str:
        return scrubbed(f"anthropic {self.model} at {self._client.base_url}: {what}", self._key)

"""A stub LLM endpoint on 127.0.0.1 for the proposer tests: real HTTP, scripted replies, every request recorded.

It speaks just enough of the Anthropic Messages API (``POST /v1/messages``, ``/v1/messages/count_tokens``) and of
OpenAI chat completions (``POST /v1/chat/completions``) for the real SDKs to talk to it. A request with no scripted
reply left gets a 418 with ``x-should-retry: false``, so a test fails instead of hanging in retries.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MESSAGES, COUNT, CHAT = "/v1/messages", "/v1/messages/count_tokens", "/v1/chat/completions"
TRICKLE = "x-stub-trickle-s"  # a scripted reply's header: send its body in 20 pieces this many seconds apart


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict


class Stub:
    def __init__(self):
        self.requests: list[Request] = []
        self._replies: dict[str, deque] = defaultdict(deque)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._closing = threading.Event()  # set on exit: a trickled answer stops, its connection closes

    def push(self, path: str, body: dict | bytes, status: int = 200, headers: dict[str, str] | None = None) -> Stub:
        """The next reply to ``path``; ``bytes`` go out as they are (a malformed answer)."""
        self._replies[path].append((status, dict(headers or {}), body))
        return self

    def bodies(self, path: str = MESSAGES) -> list[dict]:
        return [r.body for r in self.requests if r.path == path]

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Stub:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                path = self.path.split("?")[0]
                with stub._lock:
                    stub.requests.append(Request(path, {k.lower(): v for k, v in self.headers.items()},
                                                 json.loads(raw or b"{}")))
                    queue = stub._replies[path]
                    status, headers, body = queue.popleft() if queue else (
                        418, {"x-should-retry": "false"}, error("not_found_error", f"no reply scripted for {path}"))
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                trickle = float(headers.pop(TRICKLE, 0) or 0)
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if not trickle:
                    self.wfile.write(data)
                    return
                step = max(1, len(data) // 20)  # 20 pieces, ``trickle`` seconds apart: each read is quick
                for i in range(0, len(data), step):
                    if stub._closing.is_set():  # the test is over: the client's read ends now, not in 20 pieces
                        self.close_connection = True
                        return
                    try:
                        self.wfile.write(data[i:i + step])
                        self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):  # the client gave up on the answer
                        return
                    stub._closing.wait(trickle)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        serve = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        serve.start()
        return self

    def __exit__(self, *exc):
        assert self._server is not None
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        # a call the provider abandoned at its deadline reads on in a thread of its own: it ends with its answer cut,
        # here, not while the next test imports (two threads compiling at once crash Python 3.11.7)
        end = time.monotonic() + 10
        for t in [t for t in threading.enumerate() if t.name == "llm-request"]:
            t.join(max(0.0, end - time.monotonic()))


def tool_use(inp: dict, *, name: str = "propose", input_tokens: int = 1200, output_tokens: int = 300,
             cache_read: int = 0, cache_write: int = 0, text: str = "", n: int = 1) -> dict:
    """A Messages API reply holding one forced tool call."""
    content = ([{"type": "text", "text": text}] if text else []) + [
        {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": inp}]
    return {"id": f"msg_{n:02d}", "type": "message", "role": "assistant", "model": "claude-stub",
            "content": content, "stop_reason": "tool_use", "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                      "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}}


def text_only(text: str, stop_reason: str = "max_tokens") -> dict:
    """A Messages API reply with no tool call (e.g. cut at max_tokens)."""
    return {"id": "msg_text", "type": "message", "role": "assistant", "model": "claude-stub",
            "content": [{"type": "text", "text": text}], "stop_reason": stop_reason, "stop_sequence": None,
            "usage": {"input_tokens": 1000, "output_tokens": 2048}}


def error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}


def overloaded() -> tuple[dict, int, dict]:
    """(body, status, headers) of a 529 the SDK does not retry here (``x-should-retry: false``)."""
    return error("overloaded_error", "Overloaded"), 529, {"x-should-retry": "false"}


def rate_limited(retry_after_ms: int = 20) -> tuple[dict, int, dict]:
    """(body, status, headers) of a 429 the SDK retries after ``retry-after-ms``."""
    return error("rate_limit_error", "slow down"), 429, {"retry-after-ms": str(retry_after_ms)}


def chat_tool_call(arguments: dict | str, *, name: str = "propose", prompt_tokens: int = 900,
                   completion_tokens: int = 200, cached: int = 0, n: int = 1) -> dict:
    """A chat completion whose message holds one function call (arguments as the JSON text endpoints send)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    call = {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": args}}
    return {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 0, "model": "stub-model",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": None, "tool_calls": [call]}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": cached}}}

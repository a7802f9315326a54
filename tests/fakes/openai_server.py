"""A local fake of an OpenAI-compatible chat-completions API, over real HTTP, recording every call.

    server = FakeOpenAI(api_key="sk-test").start()
    server.enqueue(Reply(status=429, headers={"Retry-After": "2"}), Reply(content="not json"))
    ... httpx / LlmJudge with base_url=server.base_url ...
    server.requests                    # every request received, in order, with its arrival time
    server.stop()

Replies queued with `enqueue` are served first, in order; after that every request gets the
default verdict: `verdict(user_message) -> (score, rationale)`, by default 1.0 when the answer
section contains "PASS" and 0.0 otherwise.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fakes.http_server import FakeHttpServer

Verdict = Callable[[str], tuple[float, str]]
_ANSWER = re.compile(r"<answer>(.*)</answer>", re.DOTALL)


def pass_if_marked(user_message: str) -> tuple[float, str]:
    found = _ANSWER.search(user_message)
    answer = found.group(1) if found else ""
    if "PASS" in answer:
        return 1.0, "The answer meets the criterion."
    return 0.0, "The answer does not meet the criterion."


@dataclass(frozen=True)
class Reply:
    status: int = 200
    content: str | None = None  # the assistant message; None = the default verdict as JSON
    body: str | None = None  # the raw response body, overriding everything else
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (to provoke client time-outs)
    usage: tuple[int, int] = (120, 30)  # prompt_tokens, completion_tokens


@dataclass(frozen=True)
class Request:
    path: str
    headers: dict[str, str]  # lower-cased names
    body: Any
    status: int
    at: float = 0.0  # time.monotonic() when the request arrived (this fake only records it)


class FakeOpenAI(FakeHttpServer):
    def __init__(self, *, api_key: str | None = None, verdict: Verdict = pass_if_marked) -> None:
        super().__init__()
        self.api_key = api_key
        self.verdict = verdict
        self.requests: list[Request] = []
        self.max_in_flight = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._in_flight = 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return _handler_for(self)

    @property
    def base_url(self) -> str:
        return self.root + "/v1"

    # -- scripting and inspection -----------------------------------------------------------------

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def calls(self) -> int:
        with self._lock:
            return len(self.requests)

    def log(self) -> list[Request]:
        """Every request answered so far, in order (a copy)."""
        with self._lock:
            return list(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self._queue.clear()
            self.max_in_flight = 0

    # -- serving ----------------------------------------------------------------------------------

    def _next(self) -> Reply | None:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._queue.popleft() if self._queue else None

    def _done(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def respond(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """Record the request as it arrives, then answer it (after the scripted delay)."""
        arrived = time.monotonic()
        scripted = self._next()
        try:
            body = json.loads(raw or b"null")
        except json.JSONDecodeError:
            body = None
        status, extra, payload = self._answer(path, headers, body, scripted)
        self._done(Request(path, headers, body, status, arrived))
        if scripted is not None and scripted.delay_s:
            time.sleep(scripted.delay_s)
        with self._lock:
            self._in_flight -= 1
        return status, extra, payload

    def _answer(
        self, path: str, headers: dict[str, str], body: Any, scripted: Reply | None
    ) -> tuple[int, dict[str, str], bytes]:
        if path != "/v1/chat/completions":
            return _error(404, f"no route {path}")
        if self.api_key is not None and headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "messages is required")
        reply = scripted or Reply()
        if reply.body is not None:
            return reply.status, reply.headers, reply.body.encode()
        if reply.status != 200:
            return _error(reply.status, f"scripted {reply.status}", reply.headers)
        content = reply.content if reply.content is not None else self._verdict(body)
        return 200, reply.headers, _completion(body.get("model", ""), content, reply.usage)

    def _verdict(self, body: dict[str, Any]) -> str:
        user = next((m["content"] for m in body["messages"] if m.get("role") == "user"), "")
        score, rationale = self.verdict(user)
        return json.dumps({"score": score, "rationale": rationale})


def _completion(model: str, content: str, usage: tuple[int, int]) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    ).encode()


def _error(
    status: int, message: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    body = json.dumps({"error": {"message": message, "type": "fake_error", "code": status}})
    return status, headers or {}, body.encode()


def _handler_for(server: FakeOpenAI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length)
            headers = {k.lower(): v for k, v in self.headers.items()}
            status, extra, payload = server.respond(self.path, headers, raw)
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for name, value in extra.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a time-out test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler

"""A local OpenAI-compatible chat-completions server for tests and benchmarks (stdlib only).

Real HTTP instead of a mocked client, so timeouts, retries, status codes and concurrency
limits are exercised through the same SDK code path as against vLLM or ``swift deploy``.

    with SimServer(delay_s=0.2, fail_first=2, status=500) as server:
        sim = OpenAISimulator(server.base_url, "sim")
        ...
        server.requests     # JSON bodies received, in arrival order
        server.max_in_flight

A "down" endpoint is simply ``free_port()`` with nothing listening.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], "str | None"] | str | None


def default_reply(body: dict[str, Any]) -> str:
    """Deterministic: the customer leaves once the agent (flipped to "user") says "done"."""
    said = next((m.get("content") or "" for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    return "Sure. ###STOP###" if "done" in said.lower() else "My email is a@b.c"


def free_port() -> int:
    """A local port with (almost certainly) nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 would drop simultaneous connects of a concurrency test


class SimServer:
    """Chat completions with optional delay, first-N failures and hangs; counts what it sees.

    ``reply(body)`` may return None or "" to test empty-reply handling. ``hang_s`` sleeps that
    long (longer than the client's timeout) before answering; closing the server wakes sleepers.
    """

    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        fail_first: int = 0,
        status: int = 500,
        reply: Reply = None,
        hang_s: float = 0.0,
        message: str = "simulated failure",
    ) -> None:
        self.delay_s = delay_s
        self.message = message
        self.fail_first = fail_first
        self.status = status
        self.reply = reply if reply is not None else default_reply
        self.hang_s = hang_s
        self.requests: list[dict[str, Any]] = []
        self.failed = 0  # requests answered with ``status``
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd = _Server(("127.0.0.1", 0), self._handler())
        self.port = int(self._httpd.server_address[1])
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        # A short poll interval: shutdown() waits for one poll, 0.5 s by default, per test.
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.02,), daemon=True)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.requests)

    def __enter__(self) -> SimServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._closing.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            self._closing.wait(self.hang_s or self.delay_s)  # returns early when the server closes
            if n <= self.fail_first:
                with self._lock:
                    self.failed += 1
                return self.status, {"error": {"message": f"{self.message} {n}", "type": "server_error"}}
            content = self.reply if isinstance(self.reply, str) else self.reply(body)
            return 200, {
                "id": f"chatcmpl-sim-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "sim"),
                "choices": [
                    {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        finally:
            with self._lock:
                self.in_flight -= 1

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0: one request per connection, so a closed server cannot keep answering
            # over a pooled keep-alive connection.
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError as exc:
                    self._send(400, {"error": {"message": f"bad JSON: {exc}", "type": "invalid_request_error"}})
                    return
                self._send(*server._answer(body))

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (its timeout): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler

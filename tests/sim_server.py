"""A local OpenAI-compatible chat-completions server for tests and benchmarks (stdlib only).

Real HTTP instead of a mocked client, so timeouts, retries, status codes and concurrency
limits are exercised through the same SDK code path as against vLLM or ``swift deploy``.

    with SimServer(delay_s=0.2, fail_first=2, status=500) as server:
        sim = OpenAISimulator(server.base_url, "sim", guidelines="Play the customer.")
        ...
        server.requests     # JSON bodies received, in arrival order
        server.played       # the fault each of them got ("ok" when none)
        server.max_in_flight

The same server plays each misbehaviour of a real one by schedule (``faults``: a list by arrival
order, or ``body -> name``; see :data:`FAULTS`), and with ``models`` it serves ``GET /v1/models``
and answers a request for another model with vLLM's 404. A "down" endpoint is simply
``free_port()`` with nothing listening.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict[str, Any]], Any] | str | None  # the content: text, or any JSON a model's server may send
Faults = Callable[[dict[str, Any]], str] | Sequence[str] | None

# Transport and server faults: what a client must retry, then count as infrastructure.
SERVER_FAULTS = {
    "http_500": "status 500 with an error body",
    "not_json": "status 200, a body that is not JSON",
    "no_choices": "status 200, a JSON object without choices",
    "slow": "answers after slow_s, longer than the client's timeout",
    "die": "sends the headers, then closes the connection without the body",
}
# What a model can send through a healthy server: the client must read it and the episode score it.
MODEL_FAULTS = {
    "empty": 'content ""',
    "null": "content null",
    "length": 'content "", finish_reason length',
    "length_text": "the reply's first half, finish_reason length",
    "tool_calls_string": 'tool_calls "get_user_details" (a string)',
    "tool_calls_strings": 'tool_calls ["get_user_details"] (a list of strings)',
    "tool_calls_dict": "tool_calls one call object, not a list",
    "content_parts": 'content as OpenAI content parts [{"type": "text", "text": ...}, ...]',
    "content_number": "content 42",
    "tokens_nan": "usage.completion_tokens NaN",
    "tokens_negative": "usage.completion_tokens -5",
    "tokens_string": 'usage.completion_tokens "12"',
}
FAULTS = {"ok": "the reply", "unknown_model": "vLLM's 404 for a model it does not serve"}
FAULTS |= SERVER_FAULTS | MODEL_FAULTS


def default_reply(body: dict[str, Any]) -> str:
    """Deterministic: the customer leaves once the agent says "done" (its last message: flipped to "user" in the chat
    form, the transcript's last line in the transcript form)."""
    said = next((m.get("content") or "" for m in reversed(body.get("messages", [])) if m.get("role") == "user"), "")
    if isinstance(said, str) and said.startswith("<conversation>\n"):
        said = said.partition("\n</conversation>")[0].rpartition("\n")[2]
    return "Sure. ###STOP###" if "done" in said.lower() else "My email is a@b.c"


def free_port() -> int:
    """A local port with (almost certainly) nothing listening on it."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_listening(proc: Any, port: int, log: Any, timeout_s: float = 60.0) -> None:
    """Return once a server process (``subprocess.Popen``) listens on ``port``; fail with its ``log`` (a Path) if
    it exits or stays silent for ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        assert proc.poll() is None, f"the server exited: {log.read_text()}"
        assert time.monotonic() < deadline, f"the server did not listen: {log.read_text()}"
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 2048  # uvicorn's backlog: 5 or 128 drops a batch's simultaneous connects (1 s retries)


def _error(message: str, kind: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind}}


def _body(fault: str, content: str | None, model: str, n: int) -> tuple[dict[str, Any], str]:
    """A chat completion with ``fault`` played on it, and its finish reason."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    usage: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    finish = "stop"
    text = content or ""
    if fault in ("empty", "length"):
        message["content"] = ""
    elif fault == "null":
        message["content"] = None
    elif fault == "length_text":
        message["content"] = text[: len(text) // 2]
    elif fault.startswith("tool_calls_"):
        message["content"] = ""
        call = {"id": "c1", "type": "function", "function": {"name": "get_user_details", "arguments": "{}"}}
        message["tool_calls"] = {
            "tool_calls_string": "get_user_details",
            "tool_calls_strings": ["get_user_details"],
            "tool_calls_dict": call,
        }[fault]
    elif fault == "content_parts":
        half = len(text) // 2
        message["content"] = [{"type": "text", "text": text[:half]}, {"type": "text", "text": text[half:]}]
    elif fault == "content_number":
        message["content"] = 42
    elif fault.startswith("tokens_"):
        usage["completion_tokens"] = {"tokens_nan": float("nan"), "tokens_negative": -5, "tokens_string": "12"}[fault]
    if fault in ("length", "length_text"):
        finish = "length"
    choice = {"index": 0, "message": message, "finish_reason": finish}
    body = {
        "id": f"chatcmpl-sim-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage,
    }
    return body, finish


class SimServer:
    """Chat completions with optional delay, first-N failures, hangs and scheduled faults; counts what it sees.

    ``reply(body)`` may return None or "" to test empty-reply handling, or any JSON value as the content;
    ``calls(body)``, when given, is the message's ``tool_calls`` (any JSON). A request body that is not UTF-8 gets
    vLLM's 400. ``hang_s`` sleeps that long (longer than the client's timeout) before answering; closing the server
    wakes sleepers.
    ``faults`` names the fault each request gets (by arrival order, "ok" past its end, or from the
    request body); ``models``: the names it serves (None: any, and no model list).
    """

    def __init__(
        self,
        *,
        delay_s: float = 0.0,
        fail_first: int = 0,
        status: int = 500,
        reply: Reply = None,
        calls: Callable[[dict[str, Any]], Any] | None = None,
        hang_s: float = 0.0,
        message: str = "simulated failure",
        faults: Faults = None,
        models: Sequence[str] | None = None,
        list_models: bool = True,
        slow_s: float = 3.0,
        hold_until: int = 0,
        usage: bool = False,
        keep_alive: bool = False,
    ) -> None:
        self.delay_s = delay_s
        self.keep_alive = keep_alive  # HTTP/1.1, connections kept between requests (as vLLM keeps them)
        # Replies wait (at most delay_s) until this many requests are in flight at once: a test of concurrency
        # then does not depend on how fast a loaded machine starts them, only on whether they overlap at all.
        self.hold_until = hold_until
        self.usage = usage  # report a token per word of the messages and of the reply (else 0 and 0)
        self.message = message
        self.fail_first = fail_first
        self.status = status
        self.reply = reply if reply is not None else default_reply
        self.calls = calls
        self.hang_s = hang_s
        self.faults, self.slow_s = faults, slow_s
        self.models = list(models) if models is not None else None
        self.list_models = list_models
        self.requests: list[dict[str, Any]] = []
        self.played: list[str] = []  # the fault each request got, in arrival order
        self.failed = 0  # requests answered with ``status``
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
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

    def _fault(self, body: dict[str, Any], n: int) -> str:
        if self.models is not None and body.get("model") not in self.models:
            return "unknown_model"
        if callable(self.faults):
            fault = self.faults(body)
        else:
            fault = self.faults[n - 1] if self.faults is not None and n <= len(self.faults) else "ok"
        if fault not in FAULTS:
            raise ValueError(f"unknown fault {fault!r}; one of {sorted(FAULTS)}")
        return fault

    def _answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any] | bytes | None]:
        """The status and the body: an object (JSON), raw bytes, or None to die after the headers."""
        with self._lock:
            self.requests.append(body)
            n = len(self.requests)
            fault = self._fault(body, n)
            self.played.append(fault)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._arrived.notify_all()
            if self.hold_until:
                self._arrived.wait_for(lambda: self.in_flight >= self.hold_until, timeout=self.delay_s)
        try:
            wait = self.slow_s if fault == "slow" else self.hang_s or (0.0 if self.hold_until else self.delay_s)
            self._closing.wait(wait)  # returns early when the server closes
            if n <= self.fail_first or fault == "http_500":
                with self._lock:
                    self.failed += 1
                return (self.status if n <= self.fail_first else 500), _error(f"{self.message} {n}", "server_error")
            if fault == "unknown_model":
                return 404, _error(f"The model `{body.get('model')}` does not exist.", "NotFoundError")
            if fault == "not_json":
                return 200, b"<html><body>502 Bad Gateway</body></html>"
            if fault == "no_choices":
                return 200, {"id": f"chatcmpl-sim-{n}", "object": "chat.completion", "model": body.get("model")}
            if fault == "die":
                return 200, None
            content = self.reply if isinstance(self.reply, str) else self.reply(body)
            answer = _body(fault, content, body.get("model", "sim"), n)[0]
            if self.calls is not None:
                answer["choices"][0]["message"]["tool_calls"] = self.calls(body)
            if self.usage:  # a token per word: what the client's ledger must add up to
                prompt = sum(len(str(m.get("content") or "").split()) for m in body.get("messages", []))
                answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": len((content or "").split())}
            return 200, answer
        finally:
            with self._lock:
                self.in_flight -= 1

    def _model_list(self) -> tuple[int, dict[str, Any]]:
        if self.models is None or not self.list_models:
            return 404, _error("no route /v1/models", "not_found")
        return 200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "sim"} for m in self.models]}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            # HTTP/1.0 by default: one request per connection, so a closed server cannot keep answering
            # over a pooled keep-alive connection. A benchmark keeps them, as a model server does.
            protocol_version = "HTTP/1.1" if server.keep_alive else "HTTP/1.0"
            disable_nagle_algorithm = True  # headers and body leave at once, as a model server sends them

            def do_GET(self) -> None:
                if self.path.rstrip("/") != "/v1/models":
                    self._send(404, _error(f"no route {self.path}", "not_found"))
                    return
                self._send(*server._model_list())

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, _error(f"no route {self.path}", "not_found"))
                    return
                try:
                    body = json.loads((self.rfile.read(length) or b"{}").decode("utf-8"))  # strict, as vLLM reads it
                except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                    self._send(400, _error(f"bad JSON: {exc}", "invalid_request_error"))
                    return
                self._send(*server._answer(body))

            def _send(self, status: int, payload: dict[str, Any] | bytes | None) -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data) if payload is not None else 4096))
                    self.end_headers()
                    if payload is None:  # die mid-reply: the client waits for 4096 bytes that never come
                        self.wfile.flush()
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass  # the client gave up (its timeout): nothing to answer

            def log_message(self, format: str, *args: Any) -> None:
                pass  # keep test output clean

        return Handler

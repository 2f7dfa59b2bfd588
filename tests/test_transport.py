"""The endpoints' transport on real sockets: reply framing, pooled connections, a kept connection the server closed,
the proxy settings read again when they change.

A scripted HTTP server on a real socket plays what the tests' chat server cannot: chunked replies, replies framed by
the connection's close, interim 100 replies, and a server that closes a kept-alive connection after each reply
(uvicorn does so once it has sat idle for 5 s).
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from urllib.parse import urlsplit

import pytest
from sim_server import SimServer

from rewardkit.loop import transport
from rewardkit.loop.transport import TransportError

OK = json.dumps({"ok": True}).encode()


def framed(body: bytes, *headers: str) -> bytes:
    return b"\r\n".join([b"HTTP/1.1 200 OK", *(h.encode() for h in headers), b"", body])


# Chunked: 5 bytes, then the rest with a chunk extension, the last chunk, a trailer field.
CHUNKED = b"5\r\n" + OK[:5] + b"\r\n" + f"{len(OK) - 5:x};ext=1\r\n".encode() + OK[5:] + b"\r\n0\r\nX-T: t\r\n\r\n"
# name -> (the bytes the server answers, whether it closes the connection after them)
REPLIES: dict[str, tuple[bytes, bool]] = {
    "content-length": (framed(OK, f"Content-Length: {len(OK)}"), False),
    "chunked": (framed(CHUNKED, "Transfer-Encoding: chunked"), False),
    "until close": (b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + OK, True),
    "interim 100": (b"HTTP/1.1 100 Continue\r\n\r\n" + framed(OK, f"Content-Length: {len(OK)}"), False),
    "no body": (b"HTTP/1.1 204 No Content\r\n\r\n", False),
}


class ScriptedServer:
    """Answers each request on a real socket with ``answer(request_head)`` -> (bytes, close after them)."""

    def __init__(self, answer: Callable[[bytes], tuple[bytes, bool]]) -> None:
        self.answer = answer
        self.heads: list[bytes] = []  # every request's head, in arrival order
        self.connections = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/v1/chat/completions"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:  # closed
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                while len(buffer) < length:
                    buffer += conn.recv(65536)
                buffer = buffer[length:]
                self.heads.append(head)
                reply, close = self.answer(head)
                conn.sendall(reply)
                if close:
                    return

    def close(self) -> None:
        self._listener.close()


@pytest.fixture
def serve() -> Iterator[Callable[..., ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(answer: Callable[[bytes], tuple[bytes, bool]]) -> ScriptedServer:
        servers.append(ScriptedServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("name", REPLIES)
def test_each_framing_is_read_whole_twice_over(serve: Callable[..., ScriptedServer], name: str) -> None:
    server = serve(lambda head: REPLIES[name])
    for _ in range(2):  # the second request on the kept connection, or on a new one after a close
        status, body = transport.post(server.url, {"q": 1}, {}, timeout_s=5)
        assert (status, body) == ((204, b"") if name == "no body" else (200, OK))
    # kept-alive framings reuse one connection; a reply framed by the close needs a connection each
    assert server.connections == (2 if name == "until close" else 1)


def test_a_kept_connection_the_server_closed_is_replaced_at_once(serve: Callable[..., ScriptedServer]) -> None:
    # Keep-alive promised (HTTP/1.1, no "Connection: close"), then closed after each reply, as a server does with an
    # idle connection: each later request finds its pooled connection closed and is sent again on a new one, at
    # once and only once (3 requests, 3 connections), never reported as a failure.
    server = serve(lambda head: (REPLIES["content-length"][0], True))
    for _ in range(3):
        assert transport.post(server.url, {"q": 1}, {}, timeout_s=5) == (200, OK)
    assert (len(server.heads), server.connections) == (3, 3)


def test_a_reply_cut_short_fails_and_is_not_sent_again(serve: Callable[..., ScriptedServer]) -> None:
    # The head and 3 of 11 body bytes, then the close: a reply had begun, so the request is not replayed.
    server = serve(lambda head: (framed(OK[:3], f"Content-Length: {len(OK)}"), True))
    with pytest.raises(TransportError, match="IncompleteRead"):
        transport.post(server.url, {"q": 1}, {}, timeout_s=5)
    assert len(server.heads) == 1


def test_threads_share_the_pool() -> None:
    # 8 threads x 3 requests, one after another in each: 24 requests over at most 8 connections, not 24.
    with SimServer(keep_alive=True, reply="hi") as server:
        url = server.base_url + "/chat/completions"

        def work() -> None:
            for _ in range(3):
                assert transport.post(url, {"model": "sim", "messages": []}, {}, timeout_s=5)[0] == 200

        threads = [threading.Thread(target=work) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        key = ("http", "127.0.0.1", urlsplit(url).port, None)
        assert server.count == 24 and 1 <= len(transport._IDLE[key]) <= 8


def test_a_proxy_set_later_is_taken(serve: Callable[..., ScriptedServer], monkeypatch: pytest.MonkeyPatch) -> None:
    # The proxy lookup is cached by the proxy variables' values: setting one reroutes the next request.
    direct = serve(lambda head: REPLIES["content-length"])
    proxy = serve(lambda head: REPLIES["content-length"])
    for name in ("http_proxy", "HTTP_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert transport.post(direct.url, {}, {}, timeout_s=5)[0] == 200
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{proxy.port}")
    assert transport.post("http://chat.invalid:8000/v1/chat/completions?x=1", {}, {}, timeout_s=5)[0] == 200
    request_line, *headers = proxy.heads[0].split(b"\r\n")
    assert request_line == b"POST http://chat.invalid:8000/v1/chat/completions?x=1 HTTP/1.1"  # the whole URL
    assert b"Host: chat.invalid:8000" in headers

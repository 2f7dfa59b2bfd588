"""One HTTP/1.1 connection kept alive: a request written in one send, its reply read through a buffer of the
connection's own.

``http.client`` still opens the connection (TCP, a proxy's tunnel, TLS), but its request and reply machinery
is not used: it parses every reply's headers with the ``email`` package and writes each header line on its
own, several times the CPU of the exchange itself, and a GRPO step makes thousands of them.
``benchmarks/bench_multi_turn.py`` measures the loop on it. What is read: a status line, header lines, and a
body framed by ``Content-Length``, chunked transfer coding, or the connection's close (RFC 9112 section 6).
"""

from __future__ import annotations

import http.client
import socket
from collections.abc import Mapping

MAX_HEAD = 64 * 1024  # bytes of status line and headers a reply may have
_RECV = 256 * 1024


class StaleConnection(ConnectionError):
    """A kept-alive connection the server had closed while it sat idle: no byte of a reply came back."""


# How a closed peer shows: on the write, on the first read, or as a read of nothing.
_GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, http.client.RemoteDisconnected)


class Connection:
    """A connection to one origin, opened by ``opener`` (an ``http.client`` connection, not yet connected) on first
    use and again after a close; used by one thread at a time."""

    def __init__(self, opener: http.client.HTTPConnection) -> None:
        self._opener = opener
        self._sock: socket.socket | None = None
        self._buffer = bytearray()

    def exchange(
        self, method: str, target: str, host: str, headers: Mapping[str, str], body: bytes | None, timeout_s: float
    ) -> tuple[int, bytes]:
        """Send one request and read its whole reply: the status and the body. Raises :class:`StaleConnection`
        when a kept socket turns out closed before any reply, ``TimeoutError`` when a read or write waits longer
        than ``timeout_s``, and ``OSError`` or ``http.client.HTTPException`` for what else breaks."""
        kept = self._sock is not None
        sock = self._sock if self._sock is not None else self._connect(timeout_s)
        sock.settimeout(timeout_s)
        lines = [f"{method} {target} HTTP/1.1", f"Host: {host}", "Accept-Encoding: identity"]
        lines += [f"{name}: {value}" for name, value in headers.items()]
        if body is not None:
            lines.append(f"Content-Length: {len(body)}")
        request = "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + (body or b"")
        head = None
        try:
            sock.sendall(request)
            head = self._head()
            return self._reply(method, head)
        except _GONE as exc:
            stale = kept and head is None and not self._buffer  # not a byte of a reply: the request never reached it
            self.close()
            if stale:
                raise StaleConnection(f"the server had closed the kept connection: {exc}") from exc
            raise
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
        self._sock = self._opener.sock = None
        self._buffer.clear()

    def _connect(self, timeout_s: float) -> socket.socket:
        self._opener.timeout = timeout_s
        self._opener.connect()  # TCP, then the proxy's CONNECT tunnel and TLS where they apply
        self._sock = self._opener.sock
        assert self._sock is not None
        return self._sock

    def _recv(self) -> bool:
        """Read what has come; False when the server closed the connection."""
        assert self._sock is not None
        chunk = self._sock.recv(_RECV)
        self._buffer += chunk
        return bool(chunk)

    def _head(self) -> bytes:
        """The status line and headers of the next reply (100 Continue and other interim replies skipped)."""
        while True:
            while (end := self._buffer.find(b"\r\n\r\n")) < 0:
                if len(self._buffer) > MAX_HEAD:
                    raise http.client.LineTooLong(f"reply head over {MAX_HEAD} bytes")
                if not self._recv():
                    if self._buffer:
                        raise http.client.IncompleteRead(bytes(self._buffer))
                    raise http.client.RemoteDisconnected("the server closed the connection without a reply")
            head = bytes(self._buffer[:end])
            del self._buffer[: end + 4]
            code = head[9:12]  # after "HTTP/1.x "
            if not code.startswith(b"1") or code == b"101":
                return head

    def _reply(self, method: str, head: bytes) -> tuple[int, bytes]:
        status_line, *header_lines = head.split(b"\r\n")
        version, _, rest = status_line.partition(b" ")
        if not version.startswith(b"HTTP/1.") or not rest[:3].isdigit():
            raise http.client.BadStatusLine(status_line.decode("latin-1", "replace"))
        status = int(rest[:3])
        headers = {}
        for line in header_lines:
            name, colon, value = line.partition(b":")
            if colon:  # only framing fields are read: lower-cased, names and values
                headers[name.strip().lower()] = value.strip().lower()
        connection = headers.get(b"connection", b"")
        close = b"close" in connection or (version == b"HTTP/1.0" and b"keep-alive" not in connection)
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif b"chunked" in headers.get(b"transfer-encoding", b""):
            body = self._chunked()
        elif b"content-length" in headers:
            length = headers[b"content-length"]
            if not length.isdigit():
                raise http.client.HTTPException(f"bad Content-Length {length!r}")
            body = self._exact(int(length))
        else:  # the body runs to the connection's close
            while self._recv():
                pass
            body, close = bytes(self._buffer), True
            self._buffer.clear()
        if close:
            self.close()
        return status, body

    def _exact(self, n: int) -> bytes:
        while len(self._buffer) < n:
            if not self._recv():
                raise http.client.IncompleteRead(bytes(self._buffer), n - len(self._buffer))
        body = bytes(self._buffer[:n])
        del self._buffer[:n]
        return body

    def _line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > MAX_HEAD or not self._recv():
                raise http.client.IncompleteRead(bytes(self._buffer))
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    def _chunked(self) -> bytes:
        parts = []
        while True:
            size_field = self._line().split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise http.client.HTTPException(f"bad chunk size {size_field!r}") from None
            if size == 0:
                while self._line():  # trailer fields, up to the empty line
                    pass
                return b"".join(parts)
            parts.append(self._exact(size))
            if self._exact(2) != b"\r\n":
                raise http.client.HTTPException("a chunk does not end in CRLF")

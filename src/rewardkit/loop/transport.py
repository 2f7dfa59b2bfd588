"""The endpoints' transport: JSON POSTs (and the model list's GET) over a kept-alive connection per thread,
standard library only.

A GRPO step waits on thousands of simulator replies at once (MUA-RL: 256 rollouts of about 22 turns), and each
costs the client its share of one interpreter lock. The OpenAI SDK's request building (models, options, httpx)
costs several times the CPU of one ``http.client`` POST; benchmarks/bench_multi_turn.py measures the loop with it.
Each thread keeps one connection per host (a server that closes it after a reply gets a new one);
``$HTTPS_PROXY``/``$HTTP_PROXY`` and ``$NO_PROXY`` are honoured as ``urllib`` reads them.

A server's error status is the caller's to judge: :func:`post` and :func:`get` return it with the body. What the
transport itself cannot do (connect, send, read a whole reply in time) raises :class:`TransportError`, ``timeout``
set when time ran out.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

_LOCAL = threading.local()  # this thread's connections: (scheme, host, port) -> HTTPConnection


class TransportError(OSError):
    """The request did not get a whole reply: no connection, a dropped one, or no answer within the timeout."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


def post(url: str, body: Mapping[str, Any], headers: Mapping[str, str], timeout_s: float) -> tuple[int, bytes]:
    """POST ``body`` as JSON to ``url``; the status and the raw reply."""
    data = json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return _request("POST", url, data, {"Content-Type": "application/json", **headers}, timeout_s)


def get(url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, bytes]:
    """GET ``url``; the status and the raw reply."""
    return _request("GET", url, None, dict(headers), timeout_s)


def _request(method: str, url: str, data: bytes | None, headers: dict[str, str], timeout_s: float
             ) -> tuple[int, bytes]:  # fmt: skip
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn = _connection(parts.scheme, parts.hostname or "", parts.port, timeout_s)
    via_proxy = parts.scheme == "http" and conn.host != parts.hostname  # a plain proxy takes the whole URL
    try:
        conn.request(method, url if via_proxy else path, data, headers)
        response = conn.getresponse()
        return response.status, response.read()
    except TimeoutError as exc:  # socket.timeout is TimeoutError
        _drop(conn)
        raise TransportError(f"timed out after {timeout_s:g} s: {exc}", timeout=True) from exc
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, closed mid-reply
        _drop(conn)
        raise TransportError(f"{type(exc).__name__}: {exc}") from exc


def status_message(status: int, body: bytes) -> str:
    """``Error code: 404 - <message>``: the body's ``error.message`` (or top-level ``message``) when it has one,
    as OpenAI's SDK words a failed request."""
    text = f"Error code: {status}"
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return text
    error = data.get("error", data) if isinstance(data, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return f"{text} - {message}" if isinstance(message, str) and message else text


def _connection(scheme: str, host: str, port: int | None, timeout_s: float) -> http.client.HTTPConnection:
    if scheme not in ("http", "https"):
        raise TransportError(f"unsupported URL scheme {scheme!r}; use http:// or https://")
    pool: dict[tuple[str, str, int | None], http.client.HTTPConnection] = _LOCAL.__dict__.setdefault("pool", {})
    key = (scheme, host, port)
    conn = pool.get(key)
    if conn is None:
        conn = pool[key] = _open(scheme, host, port, timeout_s)
    conn.timeout = timeout_s  # applies from the next connect; a kept socket gets it below
    if conn.sock is not None:
        conn.sock.settimeout(timeout_s)
    return conn


def _open(scheme: str, host: str, port: int | None, timeout_s: float) -> http.client.HTTPConnection:
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    proxy = None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(scheme)
    if not proxy:
        return kind(host, port, timeout=timeout_s)
    hop = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if scheme == "https":  # a tunnel through the proxy: TLS end to end
        conn = kind(hop.hostname or "", hop.port, timeout=timeout_s)
        conn.set_tunnel(host, port)
        return conn
    return http.client.HTTPConnection(hop.hostname or "", hop.port, timeout=timeout_s)  # absolute URLs to the proxy


def _drop(conn: http.client.HTTPConnection) -> None:
    """Close a connection that failed; the thread's next request opens a new one."""
    conn.close()
    pool = _LOCAL.__dict__.get("pool", {})
    for key, kept in list(pool.items()):
        if kept is conn:
            del pool[key]

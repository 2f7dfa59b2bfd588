"""The endpoints' transport: JSON POSTs (and the model list's GET) over kept-alive connections, standard library
only.

A GRPO step waits on thousands of simulator replies at once (MUA-RL: 256 rollouts of about 22 turns), and each
costs the client its share of one interpreter lock. The OpenAI SDK's request building (models, options, httpx)
costs several times the CPU of a plain POST, and ``http.client``'s reply parsing several times that of the
exchange itself: requests go through :mod:`rewardkit.loop.http11` instead (``benchmarks/bench_multi_turn.py``).

Connections are pooled per origin (and proxy), not per thread: a request takes an idle one (or opens one) and
gives it back once its reply is read whole, so a batch's worker threads, and the next batch's, reuse the same
connections. A server may close an idle kept-alive connection at any time (uvicorn, and so vLLM, after 5 s
idle: a GRPO step trains longer than that between rollouts); a reused connection found closed before any reply
came is replaced and the request sent again at once, as urllib3 does, instead of counting as a failed attempt.
``$HTTPS_PROXY``/``$HTTP_PROXY`` and ``$NO_PROXY`` are honoured as ``urllib`` reads them, looked up once per
host and proxy setting (``urllib`` decodes the whole environment each time).

A server's error status is the caller's to judge: :func:`post` and :func:`get` return it with the body. What the
transport itself cannot do (connect, send, read a whole reply in time) raises :class:`TransportError`, ``timeout``
set when time ran out.
"""

from __future__ import annotations

import functools
import http.client
import json
import os
import threading
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from rewardkit.files.jsonl import dumps
from rewardkit.loop.http11 import Connection, StaleConnection

Key = tuple[str, str, int | None, str | None]  # (scheme, host, port, the proxy taken or None)
MAX_IDLE = 1024  # idle connections kept per key: a batch's worth, beyond which they are closed
_IDLE: dict[Key, list[Connection]] = {}
_IDLE_LOCK = threading.Lock()
_PROXY_VARIABLES = ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "REQUEST_METHOD")


class TransportError(OSError):
    """The request did not get a whole reply: no connection, a dropped one, or no answer within the timeout."""

    def __init__(self, message: str, timeout: bool = False) -> None:
        super().__init__(message)
        self.timeout = timeout


def post(url: str, body: Mapping[str, Any], headers: Mapping[str, str], timeout_s: float) -> tuple[int, bytes]:
    """POST ``body`` as JSON to ``url``; the status and the raw reply."""
    data = dumps(body).encode("utf-8")  # a model's lone surrogate goes escaped: the body is valid UTF-8
    return _request("POST", url, data, {"Content-Type": "application/json", **headers}, timeout_s)


def get(url: str, headers: Mapping[str, str], timeout_s: float) -> tuple[int, bytes]:
    """GET ``url``; the status and the raw reply."""
    return _request("GET", url, None, dict(headers), timeout_s)


def _request(method: str, url: str, data: bytes | None, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    if scheme not in ("http", "https"):
        raise TransportError(f"unsupported URL scheme {scheme!r}; use http:// or https://")
    key: Key = (scheme, host, parts.port, _proxy(scheme, host, tuple(map(os.environ.get, _PROXY_VARIABLES))))
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    target = url if scheme == "http" and key[3] else path  # a plain proxy takes the whole URL
    origin = parts.netloc.rpartition("@")[2]
    conn = _take(key)
    try:
        try:
            reply = conn.exchange(method, target, origin, headers, data, timeout_s)
        except StaleConnection:  # closed by the server while it sat idle: once more, on a new connection
            reply = conn.exchange(method, target, origin, headers, data, timeout_s)
    except TimeoutError as exc:  # socket.timeout is TimeoutError
        raise TransportError(f"timed out after {timeout_s:g} s: {exc}", timeout=True) from exc
    except (OSError, http.client.HTTPException) as exc:  # refused, reset, closed mid-reply
        raise TransportError(f"{type(exc).__name__}: {exc}") from exc
    _give_back(key, conn)
    return reply


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


def _take(key: Key) -> Connection:
    """An idle connection for ``key`` (the most recently used), else a new one."""
    with _IDLE_LOCK:
        idle = _IDLE.get(key)
        if idle:
            return idle.pop()
    return _open(key)


def _give_back(key: Key, conn: Connection) -> None:
    with _IDLE_LOCK:
        idle = _IDLE.setdefault(key, [])
        if len(idle) < MAX_IDLE:
            idle.append(conn)
            return
    conn.close()


def _open(key: Key) -> Connection:
    """A connection for ``key``, not yet connected: direct, through a plain proxy, or tunnelled through one."""
    scheme, host, port, proxy = key
    kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    if not proxy:
        return Connection(kind(host, port))
    hop = urlsplit(proxy if "://" in proxy else f"http://{proxy}")
    if scheme == "https":  # a tunnel through the proxy: TLS end to end
        opener = kind(hop.hostname or "", hop.port)
        opener.set_tunnel(host, port)
        return Connection(opener)
    return Connection(http.client.HTTPConnection(hop.hostname or "", hop.port))  # absolute URLs to the proxy


@functools.lru_cache(maxsize=256)
def _proxy(scheme: str, host: str, variables: tuple[str | None, ...]) -> str | None:
    """The proxy ``urllib`` takes for ``scheme`` to ``host``, or None; ``variables`` (the proxy variables' values)
    only key the cache, so a changed setting is read again."""
    return None if urllib.request.proxy_bypass(host) else urllib.request.getproxies().get(scheme)

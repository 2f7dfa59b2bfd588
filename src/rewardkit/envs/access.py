"""Who may reach a served domain: loopback by default, a token for any other address.

A served domain gives every session its own database copy and runs writes on it; on a wider bind anyone who can
reach the port could open sessions. One rule for every server rewardkit runs (``env serve --mcp`` over HTTP and
``env serve --openenv``): :func:`check_bind` refuses a non-loopback address without a token, and :class:`TokenGate`
(an ASGI middleware) lets a request through only with the token, as ``Authorization: Bearer TOKEN`` or as the
URL's first path segment (``http://HOST:PORT/TOKEN/...``, for clients that cannot set a header, such as OpenEnv's
WebSocket client); the segment is removed before the app sees the path. Any other request is refused with HTTP 401
and the reason (:data:`REFUSED`), a WebSocket's handshake too.

>>> check_bind("127.0.0.1", None)
>>> check_bind("0.0.0.0", None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
rewardkit.envs.access.BindError: --host 0.0.0.0 is not a loopback address: anyone who reaches it could open ...
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import string
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rewardkit.errors import UserError

TOKEN_ENV = "REWARDKIT_SERVE_TOKEN"
MIN_TOKEN = 16  # characters: a guessable token is no gate
# RFC 3986's unreserved characters: the same in a URL's path (no '/' to split it, no '%' decoded) and in a header.
TOKEN_CHARACTERS = frozenset(string.ascii_letters + string.digits + "-._~")
REFUSED = "a token is required: Authorization: Bearer TOKEN, or /TOKEN/ before the path"
REASON_BYTES = 300  # of a refusal's body shown in a client's error: a server's reason, not whatever it sends

Scope = MutableMapping[str, Any]
App = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class BindError(UserError, ValueError):
    """A server asked to listen where it may not, or with a token too short to protect it."""


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name: it may resolve anywhere
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a non-loopback ``host`` without a ``token``, and any token shorter than :data:`MIN_TOKEN` or with a
    character outside :data:`TOKEN_CHARACTERS`."""
    if token is not None and len(token) < MIN_TOKEN:
        raise BindError(f"--token has {len(token)} characters; use at least {MIN_TOKEN} (e.g. `openssl rand -hex 16`)")
    if token is not None and (odd := next((c for c in token if c not in TOKEN_CHARACTERS), None)) is not None:
        raise BindError(
            f"--token has the character {odd!r}: a token goes unchanged in a URL's path and in a header, so it holds "
            "only ASCII letters, digits and - . _ ~ (e.g. `openssl rand -hex 16`)"
        )
    if token is None and not is_loopback(host):
        raise BindError(
            f"--host {host} is not a loopback address: anyone who reaches it could open sessions on the domain's "
            f"databases; pass --token (or set ${TOKEN_ENV}), or bind 127.0.0.1"
        )


class TokenGate:
    """ASGI middleware: ``app`` behind ``token`` (a header or the first path segment); else 401 and the reason."""

    def __init__(self, app: App, token: str) -> None:
        self.app, self.token = app, token.encode()

    def _admitted(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization" and value.startswith(b"Bearer "):
                return hmac.compare_digest(value[len(b"Bearer ") :], self.token)
        path: str = scope.get("path", "")
        head, _, rest = path.partition("/")[2].partition("/")
        if hmac.compare_digest(head.encode(), self.token):
            scope["path"] = "/" + rest
            scope["raw_path"] = scope["path"].encode()
            return True
        return False

    async def __call__(
        self, scope: Scope, receive: Callable[[], Awaitable[Any]], send: Callable[[Any], Awaitable[None]]
    ) -> None:
        if scope["type"] not in ("http", "websocket") or self._admitted(scope):
            await self.app(scope, receive, send)
            return
        # A WebSocket is refused with the handshake's answer where the server can send one (the ASGI
        # websocket.http.response extension: uvicorn's): a bare close reaches the client as an empty HTTP 403.
        prefix = "http." if scope["type"] == "http" else "websocket.http."
        if prefix != "http." and "websocket.http.response" not in (scope.get("extensions") or {}):
            await send({"type": "websocket.close", "code": 1008, "reason": REFUSED})
            return
        body = json.dumps({"error": REFUSED}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": f"{prefix}response.start", "status": 401, "headers": headers})
        await send({"type": f"{prefix}response.body", "body": body})


def refusal_reason(exc: BaseException) -> str:
    """The reason a server gave for refusing a WebSocket handshake (the body of its HTTP answer: a token gate's 401,
    a full server's 503), decoded and bounded, as a suffix for the client's error; nothing where it gave none.
    ``exc``: websockets' ``InvalidStatus``, or an error raised from it (OpenEnv's ``ConnectionError``)."""
    response = getattr(exc, "response", None) or getattr(exc.__cause__, "response", None)
    body = getattr(response, "body", None)
    if not isinstance(body, bytes | bytearray) or not body.strip():
        return ""
    text = " ".join(bytes(body[:REASON_BYTES]).decode("utf-8", "replace").split())
    return f" ({text}{'…' if len(body) > REASON_BYTES else ''})"

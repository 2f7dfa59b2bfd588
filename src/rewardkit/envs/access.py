"""Who may reach a served domain: loopback by default, a token for any other address.

A served domain gives every session its own database copy and runs writes on it; on a wider bind anyone who can
reach the port could open sessions. One rule for every server rewardkit runs (``env serve --mcp`` over HTTP and
``env serve --openenv``): :func:`check_bind` refuses a non-loopback address without a token, and :class:`TokenGate`
(an ASGI middleware) lets a request through only with the token, as ``Authorization: Bearer TOKEN`` or as the
URL's first path segment (``http://HOST:PORT/TOKEN/...``, for clients that cannot set a header, such as OpenEnv's
WebSocket client); the segment is removed before the app sees the path.

>>> check_bind("127.0.0.1", None)
>>> check_bind("0.0.0.0", None)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
rewardkit.envs.access.BindError: --host 0.0.0.0 is not a loopback address: anyone who reaches it could open ...
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from rewardkit.errors import UserError

TOKEN_ENV = "REWARDKIT_SERVE_TOKEN"
MIN_TOKEN = 16  # characters: a guessable token is no gate

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
    """Refuse a non-loopback ``host`` without a ``token``, and any token shorter than :data:`MIN_TOKEN`."""
    if token is not None and len(token) < MIN_TOKEN:
        raise BindError(f"--token has {len(token)} characters; use at least {MIN_TOKEN} (e.g. `openssl rand -hex 16`)")
    if token is None and not is_loopback(host):
        raise BindError(
            f"--host {host} is not a loopback address: anyone who reaches it could open sessions on the domain's "
            f"databases; pass --token (or set ${TOKEN_ENV}), or bind 127.0.0.1"
        )


class TokenGate:
    """ASGI middleware: ``app`` behind ``token`` (a header or the first path segment); 401 or a closed socket else."""

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
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": "a token is required"})
            return
        body = b'{"error": "a token is required: Authorization: Bearer TOKEN, or /TOKEN/ before the path"}'
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": 401, "headers": headers})
        await send({"type": "http.response.body", "body": body})

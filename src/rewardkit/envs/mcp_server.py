"""Serve a registered :class:`Domain` as a Model Context Protocol server (docs/mcp.md).

Each domain tool becomes an MCP tool with its JSON Schema, description and annotations
(``readOnlyHint`` for reads; writes are destructive and not idempotent). A call runs
``env.call(name, arguments)`` and answers ``ToolResult.text()``, the text an in-process
agent sees, with ``isError`` set when the code is not OK; the code itself also travels
in the result's ``_meta`` (:data:`CODE_META`), so adapters need not parse the text.

Every MCP session gets its own fresh environment (``domain.make_env(None)``): over stdio
one per process, over streamable HTTP one per ``Mcp-Session-Id``, so concurrent clients
never share a database. The state is exposed as resources, not tools, so that the agent's
tool list stays the domain's: :data:`STATE_HASH_URI`, :data:`STATE_EXPORT_URI`, :data:`AUDIT_URI`.
Over HTTP every answer is a plain JSON body (the SDK's JSON response mode), never a server-sent
event, so a client with default limits reads a whole export.
:func:`encode_result` and :func:`decode_result` are the result format both sides share.

Requires the optional ``mcp`` package (``pip install 'rewardkit[mcp]'``).
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any, Literal

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, METHOD_NOT_FOUND

from rewardkit.envs.access import TokenGate, check_bind
from rewardkit.envs.domain import Domain
from rewardkit.envs.harness import ToolEnvironment
from rewardkit.envs.tool import ResultCode, ToolResult, ToolSpec
from rewardkit.files.jsonl import dumps

STATE_HASH_URI = "rewardkit://state/hash"
STATE_EXPORT_URI = "rewardkit://state/export"
AUDIT_URI = "rewardkit://audit"
CODE_META = "rewardkit/code"  # the harness's result code, in CallToolResult._meta
REPLAYED_META = "rewardkit/replayed"  # an idempotent replay (same idempotency_key, same call)
SESSION_HEADER = "mcp-session-id"
IDLE_S = 30 * 60.0  # the SDK's own idle timeout for HTTP sessions: their databases go with them

_RESOURCES = (
    (STATE_HASH_URI, "state-hash", "text/plain", "The canonical hash of this session's database state."),
    (STATE_EXPORT_URI, "state-export", "application/json", "This session's database state as JSON."),
    (AUDIT_URI, "audit", "application/json", "Every tool call of this session with its result code."),
)


def encode_result(result: ToolResult, replayed: bool) -> types.CallToolResult:
    """A harness result on the wire: its text as an agent reads it, the code and replay flag in ``_meta``."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=result.text())],
        is_error=not result.ok,
        _meta={CODE_META: result.code.value, REPLAYED_META: replayed},
    )


def decode_result(sent: types.CallToolResult, failed: ResultCode) -> tuple[ToolResult, bool]:
    """A tool result from any MCP server, and whether it was an idempotent replay.

    ``ToolResult.text()`` gives back the server's text exactly. The code is the one in ``_meta``
    (rewardkit's servers), else the one in a harness-style error text, else OK or ``failed``.
    """
    blocks = [
        b.text if isinstance(b, types.TextContent) else json.dumps(b.model_dump(mode="json")) for b in sent.content
    ]
    if not blocks and sent.structured_content is not None:
        blocks = [dumps(sent.structured_content)]
    text = "\n".join(blocks)
    try:
        value = json.loads(text)
    except ValueError:
        value = text
    if json.dumps(value, ensure_ascii=False) != text:  # keep the text when the JSON would not print back the same
        value = text
    meta = sent.meta or {}
    code = meta.get(CODE_META)
    if code not in ResultCode.__members__:  # not a rewardkit server: its error text may still carry a harness code
        error = value.get("error") if isinstance(value, Mapping) else None
        code = error.get("code") if sent.is_error and isinstance(error, Mapping) else None
        if code not in ResultCode.__members__ or code == "OK":
            code = failed.value if sent.is_error else "OK"
    return ToolResult(ResultCode(code), value), bool(meta.get(REPLAYED_META))


def annotations(spec: ToolSpec) -> types.ToolAnnotations:
    """MCP behaviour hints from the harness's risk level (the tools touch a closed database only)."""
    if spec.risk == "read":
        return types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
    # A write is not idempotent unless the caller passes an idempotency_key, which the hint cannot say.
    return types.ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
    )


def mcp_tools(domain: Domain) -> list[types.Tool]:
    return [
        types.Tool(
            name=name, description=spec.description, input_schema=dict(spec.parameters), annotations=annotations(spec)
        )
        for name, spec in domain.tools.items()
    ]


class Sessions:
    """One private environment per MCP session key (None: the only session of a stdio process)."""

    def __init__(self, domain: Domain, idle_s: float = IDLE_S + 60) -> None:  # a minute after the SDK gave up
        self.domain, self.idle_s = domain, idle_s
        self._envs: dict[str | None, tuple[ToolEnvironment, float]] = {}
        self._lock = threading.Lock()

    def get(self, key: str | None) -> ToolEnvironment:
        now = time.monotonic()
        with self._lock:
            # Sessions the SDK reaped for idleness never say goodbye: drop their databases here.
            stale = [k for k, (_, used) in self._envs.items() if k is not None and now - used > self.idle_s]
            for k in stale:
                self._envs.pop(k)[0].close()
            env = self._envs[key][0] if key in self._envs else self.domain.make_env(None)
            self._envs[key] = (env, now)
            return env

    def drop(self, key: str) -> None:
        with self._lock:
            entry = self._envs.pop(key, None)
        if entry is not None:
            entry[0].close()

    def __len__(self) -> int:
        return len(self._envs)

    def close(self) -> None:
        with self._lock:
            envs, self._envs = list(self._envs.values()), {}
        for env, _ in envs:
            env.close()


def _session_key(ctx: Any) -> str | None:
    request = ctx.request  # the HTTP request on streamable HTTP, None on stdio
    if request is None:
        return None
    key = request.headers.get(SESSION_HEADER)
    if not key:
        raise MCPError(
            code=INVALID_REQUEST,
            message="this server keeps one database per MCP session; connect with a stateful session "
            "(the initialize handshake), not stateless or per-request calls",
        )
    return str(key)


def build_server(domain: Domain, sessions: Sessions) -> Server[Any]:
    """The low-level MCP server for ``domain`` (raw JSON Schemas, no signature inference)."""
    tools = mcp_tools(domain)

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        env = sessions.get(_session_key(ctx))

        def run() -> tuple[Any, bool]:
            with env.lock:  # the call and its audit row, read back together
                result = env.call(params.name, params.arguments or {})
                return result, env.audit()[-1]["replayed"]

        return encode_result(*await anyio.to_thread.run_sync(run))

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        listed = [types.Resource(uri=u, name=n, mime_type=m, description=d) for u, n, m, d in _RESOURCES]
        return types.ListResourcesResult(resources=listed)

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        env = sessions.get(_session_key(ctx))
        readers = {
            STATE_HASH_URI: env.state_hash,
            STATE_EXPORT_URI: lambda: dumps(env.export()),
            AUDIT_URI: lambda: dumps(env.audit()),
        }
        if uri not in readers:
            raise MCPError(code=-32002, message=f"no resource {uri!r}; resources: {', '.join(readers)}")
        text = await anyio.to_thread.run_sync(readers[uri])
        mime = next(m for u, _, m, _ in _RESOURCES if u == uri)
        return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)])

    server: Server[Any] = Server(
        f"rewardkit-{domain.name}",
        instructions=f"The {domain.name} tools of rewardkit; every session has its own private database.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
    )
    return server


async def _no_discover(ctx: Any, params: Any) -> None:
    # A 2026-07-28 client probes server/discover, then sends sessionless requests over HTTP; a database per
    # session needs a session, so the probe is refused and auto-negotiating clients fall back to the handshake.
    raise MCPError(code=METHOD_NOT_FOUND, message="Method not found", data="server/discover")


class _ForgetClosedSessions:
    """ASGI wrapper: a client's DELETE ends its MCP session, so its database is closed with it."""

    def __init__(self, app: Any, sessions: Sessions) -> None:
        self.app, self.sessions = app, sessions

    async def __call__(self, scope: Mapping[str, Any], receive: Any, send: Any) -> None:
        key = None
        if scope.get("type") == "http" and scope.get("method") == "DELETE":
            key = dict(scope.get("headers") or []).get(SESSION_HEADER.encode())
        if not key:
            await self.app(scope, receive, send)
            return

        async def forget_then_send(message: Mapping[str, Any]) -> None:
            # Before the answer leaves: a client that saw its DELETE succeed never finds the database still open.
            if message["type"] == "http.response.start" and message["status"] < 400:
                self.sessions.drop(key.decode("latin-1"))
            await send(message)

        await self.app(scope, receive, forget_then_send)


def http_app(domain: Domain, host: str = "127.0.0.1", path: str = "/mcp") -> tuple[Any, Sessions]:
    """The streamable-HTTP ASGI app serving ``domain`` at ``path``, and its session table."""
    sessions = Sessions(domain)
    server = build_server(domain, sessions)
    server.add_request_handler("server/discover", types.RequestParams, _no_discover)
    # JSON responses, not server-sent events: a state export (about 2 MB for retail) is one plain HTTP body, which
    # any MCP client reads with its default settings (the SDK caps one SSE event at 1 MiB by default).
    app = server.streamable_http_app(
        streamable_http_path=path, host=host, session_idle_timeout=IDLE_S, json_response=True
    )
    return _ForgetClosedSessions(app, sessions), sessions


def serve(
    domain: Domain,
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
) -> None:
    """Serve ``domain`` until stdin closes (stdio) or the process is stopped (HTTP). Over HTTP a non-loopback
    ``host`` needs a ``token``, which every request must then carry (:mod:`rewardkit.envs.access`)."""
    if transport == "http":
        check_bind(host, token)
    if transport == "stdio":
        sessions = Sessions(domain)
        server = build_server(domain, sessions)

        async def main() -> None:
            async with stdio_server() as (read, write):
                await server.run(read, write, server.create_initialization_options())

        try:
            anyio.run(main)
        finally:
            sessions.close()
        return
    import uvicorn

    app, sessions = http_app(domain, host)
    if token is not None:
        app = TokenGate(app, token)
    # stdout is free on HTTP, but status goes to stderr like the other rewardkit diagnostics.
    print(f"serving {domain.name} over MCP at http://{host}:{port}/mcp (one database per session)", file=sys.stderr)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", lifespan="on")
    finally:
        sessions.close()

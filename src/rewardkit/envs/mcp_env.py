"""Tools from an MCP server as a rewardkit environment (docs/mcp.md).

:class:`MCPEnvironment` is one MCP session (stdio: a command line; streamable HTTP: a URL) behind the
synchronous environment contract (``mcp_domain.py`` registers a server as a domain). The async SDK runs on one
shared event-loop thread, and an environment may be called from several threads (its calls are serialised, as
in the harness). Tool failures are results; an unreachable or silent server, or one that no longer knows the session,
raises :class:`MCPUnavailableError`, one without tools or state resources :class:`MCPServerError`, each naming the
server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import anyio
import httpx2
from mcp import Client, StdioServerParameters, types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INVALID_PARAMS, INVALID_REQUEST, REQUEST_TIMEOUT

from rewardkit.envs.harness import CallingEnvironment
from rewardkit.envs.mcp_quiet import attempt
from rewardkit.envs.mcp_server import STATE_EXPORT_URI, STATE_HASH_URI, decode_result
from rewardkit.envs.schemas import schema_violation, unencodable
from rewardkit.envs.tool import IDEMPOTENCY_KEY, ResultCode, ToolResult
from rewardkit.errors import UserError

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:  # anyio's dependency on Python 3.10
    from exceptiongroup import BaseExceptionGroup

T = TypeVar("T")
logger = logging.getLogger(__name__)
SERVER_ERROR = ResultCode.PRECONDITION_FAILED  # a failed call from a server that sends no rewardkit code
# MCPError codes that mean the link or the session failed, not the tool: the connection closed, no answer in time, or
# the request refused whole, which no request of a live session gets ("Session not found" from a server restarted
# since the session opened, or that let it expire; the SDK client says "Session terminated" for the same 404).
_TRANSPORT = (CONNECTION_CLOSED, REQUEST_TIMEOUT, INVALID_REQUEST)
_SERVE_HINT = "e.g. `rewardkit env serve --domain retail --mcp` (stdio) or `... --transport http --port 8765`"
_FIX = f"start it, or fix the URL or command ({_SERVE_HINT})"
# What a dead link raises besides OSError: HTTP failures (the SDK's httpx2), closed or broken anyio streams, and
# the exception groups that carry them.
_LINK_ERRORS = (
    httpx2.HTTPError,
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    BaseExceptionGroup,
)
_TIMEOUTS = (TimeoutError, asyncio.TimeoutError, FutureTimeout)  # one class since Python 3.11, three before


class MCPUnavailableError(ConnectionError):
    """The MCP server could not be reached or stopped answering (infrastructure, not a tool result)."""


class MCPServerError(UserError, ValueError):
    """The MCP server answers but cannot serve as an environment (no tools, no state resources)."""


@dataclass(frozen=True)
class MCPToolSpec:
    """One tool as an MCP server lists it, shaped like the harness's ``ToolSpec`` for ``Domain.tools``."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    risk: Literal["read", "write"]  # read: the server's readOnlyHint; anything else may write
    annotations: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)},
        }

    def violation(self, arguments: Mapping[str, Any]) -> str | None:
        """What the listed JSON Schema refuses in ``arguments`` (the task checks' use; the server validates
        calls itself). A schema the validator cannot read checks nothing here."""
        return schema_violation(self.parameters, arguments)

    @classmethod
    def from_mcp(cls, tool: types.Tool) -> MCPToolSpec:
        hints = tool.annotations
        read = bool(hints and hints.read_only_hint)
        dumped = hints.model_dump(by_alias=True, exclude_none=True) if hints else {}
        return cls(tool.name, tool.description or "", dict(tool.input_schema), "read" if read else "write", dumped)


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_THREAD: threading.Thread | None = None
_LOOP_LOCK = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    """The event loop every MCPEnvironment's session lives on, started on first use."""
    global _LOOP, _LOOP_THREAD
    with _LOOP_LOCK:
        if _LOOP is None:
            _LOOP = asyncio.new_event_loop()
            _LOOP_THREAD = threading.Thread(target=_LOOP.run_forever, name="rewardkit-mcp-loop", daemon=True)
            _LOOP_THREAD.start()
        return _LOOP


def _link(server: str) -> Any:
    """The SDK transport for ``server``: streamable HTTP for a URL, else a subprocess speaking stdio."""
    if server.startswith(("http://", "https://")):  # the SDK's defaults: rewardkit's server answers plain JSON
        return streamable_http_client(server)
    argv = shlex.split(server)
    if not argv:
        raise MCPServerError("no MCP server given: pass an http(s):// URL or a command line that serves over stdio")
    # The whole environment, not the SDK's short safe list: the command is the user's own, like a shell's.
    return StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ), cwd=Path.cwd())


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


class MCPEnvironment(CallingEnvironment):
    """One MCP session on ``server`` (an ``http(s)://`` URL or a stdio command line), used synchronously."""

    def __init__(self, server: str, *, timeout: float = 60.0, tools: Mapping[str, MCPToolSpec] | None = None) -> None:
        self.server, self.timeout = server, timeout
        self.lock = threading.RLock()  # one call (and its audit row) at a time, as in the harness
        self._rows: list[dict[str, Any]] = []
        self._client: Client | None = None
        self._closing = asyncio.Event()  # bound to the loop on first use; set only through it
        self._ready: Future[None] = Future()
        self._held = asyncio.run_coroutine_threadsafe(self._hold(_link(server)), _loop())
        try:
            self._connected()
            self.tools: Mapping[str, MCPToolSpec] = tools if tools is not None else self._list_tools()
        except BaseException:
            self.close()
            raise
        if not self.tools:
            self.close()
            raise MCPServerError(f"the MCP server {server!r} lists no tools; serve a domain's tools ({_SERVE_HINT})")

    # --- the session, on the loop thread -----------------------------------------------

    async def _hold(self, link: Any) -> None:
        """Open the session and keep it open until close(): the SDK's contexts must exit in the task that entered."""
        quiet = attempt()  # the SDK's tracebacks about a server that is not MCP: rewardkit's one line says it
        try:
            async with Client(link, cache=None, read_timeout_seconds=self.timeout) as client:
                self._client = client
                quiet.quiet = False
                self._ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(_leaf(exc))
            elif not self._closing.is_set():
                raise  # the session died under us; the next call reports it
        finally:
            self._client = None

    def _connected(self) -> None:
        try:
            self._ready.result(timeout=self.timeout)
        except _TIMEOUTS as exc:
            why = f"no answer in {self.timeout:g}s"
            raise MCPUnavailableError(f"cannot reach the MCP server {self.server!r} ({why}); {_FIX}") from exc
        except (OSError, MCPError, *_LINK_ERRORS) as exc:
            raise MCPUnavailableError(f"cannot reach the MCP server {self.server!r} ({exc!r}); {_FIX}") from exc

    def _run(self, make: Callable[[], Awaitable[T]], what: str) -> T:
        if threading.current_thread() is _LOOP_THREAD:
            raise RuntimeError("MCPEnvironment is synchronous: do not call it from its own event-loop thread")

        async def bounded() -> T:
            return await asyncio.wait_for(make(), self.timeout)

        try:
            return asyncio.run_coroutine_threadsafe(bounded(), _loop()).result()
        except MCPUnavailableError:
            raise
        except MCPError as exc:
            if exc.code in _TRANSPORT:
                raise MCPUnavailableError(f"MCP server {self.server!r}: {what} failed: {exc.message}") from exc
            raise
        except _TIMEOUTS as exc:
            raise MCPUnavailableError(f"MCP server {self.server!r}: no answer to {what} in {self.timeout:g}s") from exc
        except (OSError, *_LINK_ERRORS) as exc:
            cause = _leaf(exc)
            raise MCPUnavailableError(f"MCP server {self.server!r}: {what} failed: {cause!r}") from cause

    def _session(self) -> Client:
        if self._client is None:
            raise MCPUnavailableError(f"MCP server {self.server!r}: the session is closed")
        return self._client

    def _list_tools(self) -> dict[str, MCPToolSpec]:
        async def walk() -> list[types.Tool]:
            listed, cursor = [], None
            while True:
                page = await self._session().list_tools(cursor=cursor)
                listed += page.tools
                if not page.next_cursor:
                    return listed
                cursor = page.next_cursor

        try:
            return {t.name: MCPToolSpec.from_mcp(t) for t in self._run(walk, "tools/list")}
        except MCPError as exc:
            raise MCPServerError(f"the MCP server {self.server!r} does not list tools ({exc.message}); {_FIX}") from exc

    # --- the environment contract --------------------------------------------------------

    def __enter__(self) -> MCPEnvironment:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """End the session (an HTTP DELETE; a stdio server process exits). Safe to call twice."""
        with self.lock:  # after the call in flight, like the harness
            if not (self._ready.done() and self._ready.exception() is None):
                self._held.cancel()  # still connecting, or never connected: stop trying
                return
            _loop().call_soon_threadsafe(self._closing.set)
            try:
                self._held.result(timeout=self.timeout)
            except (*_TIMEOUTS, OSError, MCPError, *_LINK_ERRORS) as exc:  # it had failed already, or exits slowly
                logger.debug("MCP server %r: the session ended with %r", self.server, exc)

    def audit(self) -> list[dict[str, Any]]:
        """Every call so far, as ``ToolEnvironment.audit()`` rows (recorded here, not read from the server)."""
        with self.lock:
            return [dict(row) for row in self._rows]

    def state_hash(self) -> str:
        return self._resource(STATE_HASH_URI).strip()

    def export(self) -> dict[str, Any]:
        return json.loads(self._resource(STATE_EXPORT_URI))

    # --- internals -------------------------------------------------------------------------

    def _call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolResult:
        name, arguments, refused = self._admit(name, arguments)  # the harness's own refusals, locally
        if refused is not None:
            return self._record(name, arguments, refused)
        if unencodable(arguments):  # no UTF-8 wire can carry it
            problem = "arguments: strings must be valid Unicode (found a lone surrogate)"
            return self._record(name, arguments, ToolResult.error(ResultCode.SCHEMA_VIOLATION, problem))
        try:
            sent = self._run(lambda: self._session().call_tool(name, arguments), f"tools/call {name}")
        except MCPError as exc:  # the server refused the request itself: still the call's result
            code = ResultCode.SCHEMA_VIOLATION if exc.code == INVALID_PARAMS else SERVER_ERROR
            return self._record(name, arguments, ToolResult(code, exc.message))
        return self._record(name, arguments, *decode_result(sent, SERVER_ERROR))

    def _record(
        self, name: str, arguments: Mapping[str, Any], result: ToolResult, replayed: bool = False
    ) -> ToolResult:
        if result.code not in (
            ResultCode.SCHEMA_VIOLATION,
            ResultCode.UNKNOWN_TOOL,
        ):  # the harness audits the key only then
            arguments = {k: v for k, v in arguments.items() if k != IDEMPOTENCY_KEY}
        error = result.value.get("error") if not result.ok and isinstance(result.value, Mapping) else None
        rule = error.get("rule") if isinstance(error, Mapping) else None  # a gate of the served domain refused it
        row = {
            "seq": len(self._rows) + 1,
            "tool": name,
            "arguments": json.loads(json.dumps(arguments)),
            "code": result.code.value,
            "replayed": replayed,
            "side": "agent",
            "rule": rule,
            "request": error.get("request_id") if isinstance(error, Mapping) else None,
        }
        self._rows.append(row)
        return result

    def _resource(self, uri: str) -> str:
        with self.lock:
            try:
                read = self._run(lambda: self._session().read_resource(uri), f"resources/read {uri}")
            except MCPError as exc:
                raise MCPServerError(
                    f"the MCP server {self.server!r} does not expose {uri} ({exc.message}), so task completion "
                    f"cannot be checked; serve the domain with rewardkit ({_SERVE_HINT}) or add the resource "
                    "(docs/mcp.md)"
                ) from exc
        texts = [c.text for c in read.contents if isinstance(c, types.TextResourceContents)]
        if not texts:
            raise MCPServerError(f"the MCP server {self.server!r} answered {uri} without text contents")
        return texts[0]

"""Silence the MCP SDK's own logging while rewardkit tries to connect (docs/mcp.md).

A server that does not speak MCP (a plain web server, a command that prints text) makes the SDK log
errors with tracebacks, often several per attempt, before rewardkit raises its one-line
``MCPUnavailableError``. :func:`attempt` marks the current asyncio task (and every task it starts:
context variables are inherited) as connecting; a filter on the SDK's loggers drops their records
while the mark says quiet. Once the session is open, ``Attempt.quiet = False`` lets them through again,
so a live session's diagnostics are unchanged; a failed attempt stays quiet while it is torn down.
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass

_SDK_LOGGERS = ("mcp", "mcp_types", "httpx2")  # the SDK and its HTTP client


@dataclass
class Attempt:
    quiet: bool = True


_ATTEMPT: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar("rewardkit_mcp_attempt", default=None)


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        mark = _ATTEMPT.get()
        return mark is None or not mark.quiet


_FILTER = _Quiet()


def _install() -> None:
    # A logger's filters see only the records logged on it, not its children's: every SDK logger gets one.
    names = [n for n in list(logging.Logger.manager.loggerDict) if n.split(".")[0] in _SDK_LOGGERS]
    for name in {*_SDK_LOGGERS, *names}:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


def attempt() -> Attempt:
    """Mark the current task as connecting (quiet); set ``quiet = False`` on the result once connected."""
    _install()
    mark = Attempt()
    _ATTEMPT.set(mark)
    return mark

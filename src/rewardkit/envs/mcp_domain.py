"""A registered domain whose tools come from an MCP server (docs/mcp.md).

``mcp_domain(server, base)`` lists the server's tools once and registers a :class:`Domain` with the base domain's
tasks, splits, policy, simulator guidelines, language and stop tools; every ``make_env(None)`` opens a new session
(:class:`MCPEnvironment`), so each episode gets the server's fresh state. The loop, synthesis, evaluation and the
task-completion rewards then run on it unchanged.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.envs.domain import Domain
from rewardkit.envs.mcp_env import MCPEnvironment, MCPServerError, MCPToolSpec
from rewardkit.envs.registry import get_domain, register_domain

# (server, domain name) -> the registered domain: a second call does not list the tools again.
_DOMAINS: dict[tuple[str, str], Domain] = {}
_DOMAINS_LOCK = threading.Lock()


def _make_env(server: str, tools: Mapping[str, MCPToolSpec], timeout: float, db_path: str | Path | None) -> Any:
    if db_path is not None:
        raise MCPServerError(f"an MCP environment starts from its server's own database; got db_path={db_path!r}")
    return MCPEnvironment(server, timeout=timeout, tools=tools)


def mcp_domain(server: str, base: str | Domain, name: str | None = None, timeout: float = 60.0) -> Domain:
    """The tools of ``server`` as a registered domain (``mcp:<base>`` unless named), with the tasks of ``base`` (the
    domain the server serves: a built-in name, an entry point, a path or a :class:`Domain`).

    The server's tools are listed once, here; every ``make_env(None)`` opens a new session on it.
    """
    base_domain = get_domain(base) if isinstance(base, str) else base
    name = name or f"mcp:{base_domain.name}"
    with _DOMAINS_LOCK:
        if (server, name) in _DOMAINS:
            return _DOMAINS[(server, name)]
        with MCPEnvironment(server, timeout=timeout) as probe:
            tools = dict(probe.tools)
        domain = Domain(
            name=name,
            make_env=functools.partial(_make_env, server, tools, timeout),
            tools=tools,
            tasks=base_domain.tasks,
            splits=base_domain.splits,
            policy=base_domain.policy,
            guidelines=base_domain.guidelines,
            language=base_domain.language,
            stop_tools=base_domain.stop_tools & frozenset(tools),
            data_files=base_domain.data_files,  # the tasks, splits and policy are read from there
        )
        try:
            register_domain(domain)
        except ValueError as exc:
            raise MCPServerError(f"{exc} (pass name=... to mcp_domain for another server's tools)") from None
        _DOMAINS[(server, name)] = domain
        return domain

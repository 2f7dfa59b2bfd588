"""Tool environments over real databases, for rollouts and for replaying logged trajectories.

Every caller goes through the domain registry (:mod:`rewardkit.envs.registry`).

- ``domain.py``: the :class:`Domain` contract (environment factory, tools, tasks, splits, policy);
- ``registry.py``: every domain by name (built-in, installed, or a folder anywhere), imported when first asked for;
- ``tool.py``: the tool contract (``Tool``, ``ToolSpec``, ``ToolError``, ``ResultCode``, ``ToolResult``) and
  ``@tool``, a tool's spec from its signature and docstring;
- ``harness.py``: tools over one private SQLite copy, with argument schemas, risk levels,
  idempotency keys, approval gates (``approvals.py``) and an audit log;
- ``tool_calls.py``: an agent's tool calls read out of chat messages (Hermes, OpenAI, ms-swift);
- ``calculator.py``: tau2's ``calculate`` tool without ``eval``;
- ``sqlite_env.py``: a domain's tables (schema and seed): the template per process, a private copy per
  rollout, the export and the incremental state hash;
- ``retail/``: tau2-bench's retail domain on those tables (db.json <-> rows, its tools, tasks);
- ``mcp_server.py``: any registered domain served over the Model Context Protocol, one private
  database per MCP session (``rewardkit env serve --mcp``; needs the optional ``mcp`` package);
- ``mcp_env.py`` and ``mcp_domain.py``: an MCP server's tools as an environment, and as a registered domain
  (``MCPEnvironment``, ``mcp_domain``; needs ``mcp``, imported only when these modules are).
- ``mcp_quiet.py``: the SDK's log records silenced while a connection is attempted; ``schemas.py``: tool
  arguments against JSON Schemas, worded as the harness words them (gold actions on any domain's tools).

- ``tasks.py``: tau2 tasks, read and checked one way for every consumer; ``outcomes.py``: what calls leave
  on a fresh database, and a task's gold outcome, replayed once per process; ``scenario.py``: the
  customer's words from a task's scenario; ``termination.py``: how an episode may end, and which
  endings are excluded as infrastructure.

The lowest layer above the files and the config (:mod:`rewardkit.layers`): the rewards, the
builders, the loop and the CLI import it; it imports none of them, nor ms-swift.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rewardkit.envs.approvals import Gate
from rewardkit.envs.domain import Domain
from rewardkit.envs.registry import DomainError, domain_names, get_domain, portable_ref, register_domain
from rewardkit.envs.sqlite_env import Tables, environment
from rewardkit.envs.tool import ResultCode, ToolError, ToolSpec, arguments_schema, tool, toolset

if TYPE_CHECKING:
    from rewardkit.envs.harness import CallingEnvironment


def make_env(domain: str, db_path: str | Path | None = None) -> CallingEnvironment:
    """A fresh environment of ``domain`` (a private copy of its database)."""
    return get_domain(domain).make_env(db_path)


__all__ = [  # what a domain's author needs
    "Domain",
    "DomainError",
    "Gate",
    "ResultCode",
    "Tables",
    "ToolError",
    "ToolSpec",
    "arguments_schema",
    "domain_names",
    "environment",
    "get_domain",
    "make_env",
    "portable_ref",
    "register_domain",
    "tool",
    "toolset",
]

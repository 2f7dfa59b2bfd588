"""One protocol for a tool: the harness's ToolSpec and an MCP server's listed tool both are a ``Tool``, as
``Domain.tools`` types them, and every built-in domain's tools are."""

from __future__ import annotations

import importlib.util

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.harness import CallingEnvironment
from rewardkit.envs.registry import BUILTIN
from rewardkit.envs.tool import Tool


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_every_built_in_domain_speaks_the_protocol(name: str) -> None:
    domain = get_domain(name)
    assert domain.tools and all(isinstance(spec, Tool) for spec in domain.tools.values())
    with domain.make_env(None) as env:  # an environment is a CallingEnvironment: the harness's rules of calling
        assert isinstance(env, CallingEnvironment)
        assert env.pending_approvals() == []  # nothing waits for the user before the agent has asked


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None, reason="MCPToolSpec needs the mcp package")
def test_an_mcp_listed_tool_is_a_tool() -> None:
    from rewardkit.envs.mcp_env import MCPToolSpec

    spec = MCPToolSpec("find", "Find.", {"type": "object", "properties": {"q": {"type": "string"}}}, "read")
    assert isinstance(spec, Tool)
    assert spec.violation({"q": 3}) is not None and spec.violation({"q": "x"}) is None

"""The Chinese live-stream domain over MCP: `rewardkit env serve --mcp --domain livestream` as a real subprocess.
Its gates are the served harness's: hard gates refuse with the rule's name as in-process, and a soft-gated write
stays held (an MCP client has no user-side tool: docs/domains.md says so)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

pytest.importorskip("mcp")  # the optional extra: rewardkit[mcp]

from mcp_servers import http_server
from sim_server import free_port

from rewardkit.envs import get_domain
from rewardkit.envs.mcp_env import MCPEnvironment
from rewardkit.envs.tasks import approves, gold_actions
from rewardkit.envs.tool import ResultCode

DOMAIN = get_domain("livestream")
UNGATED = {i: t for i, t in DOMAIN.tasks().items() if not approves(t)}  # no approval in their gold


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with http_server(free_port(), tmp_path_factory.mktemp("mcp") / "server.log", "livestream") as served:
        yield served


def test_every_gold_without_an_approval_ends_in_the_in_process_state(url: str) -> None:
    assert 0 < len(UNGATED) < len(DOMAIN.tasks())  # some tasks, not all, are approved by their user
    for task_id, task in UNGATED.items():
        with DOMAIN.make_env(None) as local, MCPEnvironment(url) as remote:
            here, there = local.replay(gold_actions(task)), remote.replay(gold_actions(task))
            assert [r.text() for r in there] == [r.text() for r in here], task_id  # Chinese text intact
            assert remote.state_hash() == local.state_hash(), task_id


@pytest.mark.parametrize(
    ("arguments", "code", "rule"),
    [
        ({"sku": "SP006", "new_price": 1}, ResultCode.HARD_GATE, "PRICE_BELOW_COST"),  # far below the cost
        ({"sku": "SP006", "new_price": 89}, ResultCode.APPROVAL_REQUIRED, "PRICE_CHANGE_NEEDS_APPROVAL"),  # held
    ],
)
def test_a_gate_refuses_over_mcp_as_in_process(url: str, arguments: dict, code: ResultCode, rule: str) -> None:
    call = {**arguments, "idempotency_key": "k1"}
    with MCPEnvironment(url) as remote:
        before = remote.state_hash()
        result = remote.call("change_price", call)
        assert result.code is code and json.loads(result.text())["error"]["rule"] == rule
        assert remote.state_hash() == before and remote.audit()[-1]["rule"] == rule

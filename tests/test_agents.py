"""The HTTP agent over a real local server: replies, token counts, the context limit, and failures as infrastructure."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sim_server import SimServer

from rewardkit.envs import get_domain
from rewardkit.loop.agents import AgentError, AgentReply, OpenAIAgent, make_agent_factory
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode
from rewardkit.loop.gold import GoldAgent, hermes_call
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.runs.episode_log import Scorer

RETAIL = get_domain("retail")
TASK = RETAIL.tasks()["57"]  # no gold action, nothing to say: any proper ending completes it
FAST = {"retries": 1, "backoff_s": 0.01, "timeout_s": 5.0}


def episode(agent: Any) -> dict[str, Any]:
    result = run_episode(RETAIL, TASK, agent, ScriptedSimulator(), RolloutLimits(max_turns=3))
    return Scorer("retail", require_outputs=True).record(result, TASK, 0, "run")


class TestOpenAIAgent:
    def test_reply_tools_and_model_reach_the_server(self) -> None:
        with SimServer(reply="All done. Anything else?") as server:
            agent = OpenAIAgent(server.base_url, RETAIL.tool_specs(), model="m", **FAST)
            reply = agent([{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}])
        assert reply == AgentReply("All done. Anything else?", None, "stop", 0)
        body = server.requests[0]
        assert body["model"] == "m" and body["temperature"] == 0.0 and body["tools"] == RETAIL.tool_specs()

    def test_a_completed_episode_over_http(self) -> None:
        with SimServer(reply="Everything you asked for is done.") as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        # the scripted user sees the task done (no gold action) and stops: tau2 scores it 1
        assert (record["status"], record["termination"], record["reward"]) == ("ok", "user_stop", 1.0)
        assert "tools" not in server.requests[0]  # --no-tools: none sent

    @pytest.mark.parametrize(
        ("message", "termination", "status", "reward"),
        [
            # the prompt outgrew the model's context: the policy's ending, scored 0 like tau2's length limit
            ("This model's maximum context length is 8192 tokens. However, you requested 9000", "length", "ok", 0.0),
            ("prompt is too long", "length", "ok", 0.0),
            # any other 400 (bad model name, auth): the endpoint's fault, excluded and counted
            ("The model `m` does not exist", "agent_error", "infra_error", None),
        ],
    )
    def test_http_400(self, message: str, termination: str, status: str, reward: float | None) -> None:
        with SimServer(fail_first=99, status=400, message=message) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["termination"], record["status"], record["reward"]) == (termination, status, reward)
        assert server.count == 1  # a 400 is never retried

    def test_a_failing_server_is_infrastructure_after_its_retries(self) -> None:
        with SimServer(fail_first=99, status=503) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["status"], record["termination"], record["reward"]) == ("infra_error", "agent_error", None)
        assert server.count == 2 and server.base_url in record["error"]  # 1 try + 1 retry, the URL named

    def test_a_hermes_call_from_the_server_runs_on_the_database(self) -> None:
        call = hermes_call("find_user_id_by_email", {"email": "noah.brown7922@example.com"})
        replies = iter([call, "Found you. ###STOP###"])
        with SimServer(reply=lambda body: next(replies)) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert record["tools"] == {"find_user_id_by_email": 1} and record["call_codes"] == {"OK": 1}
        tool_turn = json.dumps(server.requests[1]["messages"])
        assert "noah_brown_6181" in tool_turn  # the database's answer went back to the server


class TestFactory:
    def test_gold_is_a_fresh_agent_per_task(self) -> None:
        make, described = make_agent_factory("gold", [])
        assert described == {"kind": "gold"} and isinstance(make(TASK), GoldAgent) and make(TASK) is not make(TASK)

    def test_without_a_model_name_the_server_is_asked_and_must_answer(self) -> None:
        # SimServer has no /models route: without --agent-model the agent cannot name the model, and says so
        with SimServer(reply="ok") as server, pytest.raises(AgentError, match="cannot list its models"):
            make_agent_factory(server.base_url, [])

    @pytest.mark.parametrize("spec", ["nonsense", "/nonexistent/model", "ftp://x"])
    def test_anything_else_is_refused_naming_the_three_forms(self, spec: str) -> None:
        with pytest.raises(ValueError, match="not 'gold', not an http"):
            make_agent_factory(spec, [])

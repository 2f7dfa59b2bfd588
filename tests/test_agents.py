"""The HTTP agent over a real local server: replies, token counts, the context limit, and failures as infrastructure."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from sim_server import SimServer

from rewardkit.envs import get_domain
from rewardkit.loop.agents import AgentError, AgentReply, OpenAIAgent, make_agent_factory
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode
from rewardkit.loop.endpoint import EndpointSettings
from rewardkit.loop.gold import GoldAgent, hermes_call
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.runs.episodes.scorer import Scorer

RETAIL = get_domain("retail")
# On task 24 a whole reply like this one completes the task (1.0): nothing to change, both materials said.
DONE = "Everything you asked for is done: the t-shirts are polyester and cotton."
TASK = RETAIL.tasks()["24"]  # no gold action: a proper ending that says the two materials completes it
FAST = {"settings": EndpointSettings(retries=1, backoff_s=0.01, timeout_s=5.0)}


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
        with SimServer(reply=DONE) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        # the scripted user sees the task done (no gold action, the materials said) and stops: tau2 scores it 1
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


# --- what the model sent is the model's: scored, never retried, never a traceback -----------------------


class TestRepliesAreTheModels:
    @pytest.mark.parametrize(
        ("fault", "termination"),
        [
            ("empty", "empty_reply"),  # content "", finish_reason stop: nothing said, nothing called
            ("null", "empty_reply"),  # content null: the same
            ("content_number", "empty_reply"),  # content 42 is no text: read as empty
            ("length", "length"),  # cut off before a word: tau2's length ending
            ("length_text", "length"),  # cut mid-reply: scored 0 although half of DONE was said
        ],
    )
    def test_an_empty_or_cut_reply_is_a_scored_ending(self, fault: str, termination: str) -> None:
        # Before: retried, then agent_error (excluded, rerun by --resume forever). Task 24 would score 1.0 after
        # a whole DONE, so 0.0 here is the ending's own score.
        with SimServer(faults=[fault], reply=DONE) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["status"], record["termination"], record["reward"]) == ("ok", termination, 0.0)
        assert server.count == 1  # taken at once: never retried

    @pytest.mark.parametrize(
        ("fault", "text", "n_tokens"),
        [
            ("content_parts", DONE, 0),  # OpenAI's content parts: the text parts, joined
            ("tokens_nan", DONE, 0),  # completion_tokens NaN, -5 or "12": not a count, 0
            ("tokens_negative", DONE, 0),
            ("tokens_string", DONE, 0),
            ("empty", "", 0),
            ("content_number", "", 0),
        ],
    )
    def test_odd_shapes_are_read_as_plain_values(self, fault: str, text: str, n_tokens: int) -> None:
        with SimServer(faults=[fault], reply=DONE) as server:
            reply = OpenAIAgent(server.base_url, [], model="m", **FAST)([{"role": "user", "content": "hi"}])
        assert (reply.text, reply.n_tokens, reply.tool_calls) == (text, n_tokens, None)

    @pytest.mark.parametrize("fault", ["content_parts", "tokens_nan", "tokens_negative", "tokens_string"])
    def test_odd_shapes_of_a_whole_reply_still_complete_the_task(self, fault: str) -> None:
        with SimServer(faults=[fault], reply=DONE) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["status"], record["termination"], record["reward"]) == ("ok", "user_stop", 1.0)

    # tool_calls as a string, a list of strings, one object instead of a list: each is one malformed call,
    # answered with an error like a call whose arguments are not JSON; the next reply (DONE) ends the episode,
    # and the failed call changed nothing, so task 24 still scores 1.0.
    @pytest.mark.parametrize("fault", ["tool_calls_string", "tool_calls_strings", "tool_calls_dict"])
    def test_a_malformed_tool_call_is_a_failed_call(self, fault: str) -> None:
        with SimServer(faults=[fault], reply=DONE) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["status"], record["termination"], record["reward"]) == ("ok", "user_stop", 1.0)
        assert (record["tool_calls"], record["tool_errors"]) == (1, 1) and "OK" not in record["call_codes"]
        # what went back to the server is a well-formed call and its answer, so the next request is valid
        *_, sent, answer = server.requests[1]["messages"]
        (call,) = sent["tool_calls"]
        assert call["type"] == "function" and isinstance(call["function"]["arguments"], str)
        assert answer["role"] == "tool" and answer["tool_call_id"] == call["id"]


# --- a body that is not a chat completion is the server's: retried, then infrastructure ------------------
class TestServerFaults:
    @pytest.mark.parametrize("fault", ["not_json", "no_choices", "die", "http_500"])
    def test_retried_then_infrastructure_naming_the_endpoint(self, fault: str) -> None:
        # Before: one non-JSON 200 stopped the run (exit 2) with a message about input files.
        with SimServer(faults=[fault, fault], reply=DONE) as server:
            record = episode(OpenAIAgent(server.base_url, [], model="m", **FAST))
        assert (record["status"], record["termination"], record["reward"]) == ("infra_error", "agent_error", None)
        assert server.count == 2 and f"agent endpoint {server.base_url}" in record["error"]  # 1 try + 1 retry

    @pytest.mark.parametrize("fault", ["not_json", "no_choices", "die", "slow"])
    def test_one_bad_body_then_a_good_one_completes(self, fault: str) -> None:
        with SimServer(faults=[fault], reply=DONE, slow_s=10) as server:
            settings = EndpointSettings(retries=1, backoff_s=0.01, timeout_s=1.0)
            record = episode(OpenAIAgent(server.base_url, [], model="m", settings=settings))
        assert (record["status"], record["termination"], record["reward"]) == ("ok", "user_stop", 1.0)
        assert server.count == 2

    def test_an_unknown_model_stops_at_the_first_404(self) -> None:
        from rewardkit.loop.endpoint import EndpointConfigError

        # The server lists no models, so nothing could check the name before the run: its 404 stops the run.
        with SimServer(models=["m"], list_models=False) as server:
            agent = OpenAIAgent(server.base_url, [], model="x", **FAST)
            with pytest.raises(EndpointConfigError, match=rf"agent endpoint {server.base_url}: HTTP 404 .*'x'"):
                episode(agent)
        assert server.count == 1  # not retried


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("api_key", "", "a non-empty string"),
        ("timeout_s", 0, "a finite number of seconds > 0"),
        ("timeout_s", float("nan"), "> 0"),
        ("retries", -1, "a whole number >= 0"),
        ("retries", True, ">= 0"),
        ("backoff_s", -0.5, "a finite number of seconds >= 0"),
        ("concurrency", 0, "a whole number >= 1"),
    ],
)
def test_endpoint_settings_out_of_range_name_the_field(field: str, value: Any, expected: str) -> None:
    with pytest.raises(ValueError, match=rf"^EndpointSettings\.{field} must be .*{re.escape(expected)}.*, got "):
        EndpointSettings(**{field: value})

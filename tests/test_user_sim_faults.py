"""The user simulator against a misbehaving server: it is infrastructure, so whatever it fails to say is its fault.

The agent's empty reply is the agent's (a scored ending, tests/test_agents.py); the simulator's is a server
failure: retried, then ``SimulatorError`` (the episode ends as ``user_sim_error``, excluded, rerun by
``--resume``), however the emptiness is spelled. Content parts are read as text on both sides.
"""

from __future__ import annotations

from typing import Any

import pytest
from sim_server import SimServer

from rewardkit.envs import get_domain
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episode
from rewardkit.loop.endpoint import EndpointConfigError, EndpointSettings
from rewardkit.loop.user_sim.base import GREETING, Progress, SimulatorError, Turn
from rewardkit.loop.user_sim.openai_sim import OpenAISimulator

RETAIL = get_domain("retail")
TASK = RETAIL.tasks()["24"]
DIALOGUE = [Turn("agent", GREETING)]
REPLY = "My email is a@b.c"


def fast(base_url: str, model: str = "sim", **settings: Any) -> OpenAISimulator:
    settings = {"retries": 1, "backoff_s": 0.01, "timeout_s": 1.0, **settings}
    return OpenAISimulator(base_url, model, guidelines="Play the customer.", settings=EndpointSettings(**settings))


# Every spelling of "said nothing": a retry, then (all attempts empty) the simulator's failure.
EMPTY = ["empty", "null", "content_number", "length", "tool_calls_string", "tool_calls_dict"]
# Bodies that are not a chat completion, and transport failures: the same.
SERVER = ["not_json", "no_choices", "die", "slow", "http_500"]


@pytest.mark.parametrize("fault", EMPTY + SERVER)
def test_a_failed_reply_is_retried_and_the_retry_is_used(fault: str) -> None:
    with SimServer(faults=[fault], reply=REPLY, slow_s=10) as server:
        assert fast(server.base_url).reply(TASK, DIALOGUE, Progress()) == REPLY
    assert server.count == 2  # the fault, then the retry


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        *[(f, "empty reply") for f in EMPTY],
        ("not_json", "malformed response body"),
        ("no_choices", "malformed response body"),
        ("die", "connection failed"),
        ("slow", "timed out"),
        ("http_500", "HTTP 500"),
    ],
)
def test_after_its_retries_it_is_a_simulator_error_naming_the_endpoint(fault: str, why: str) -> None:
    sim_server = SimServer(faults=[fault, fault], reply=REPLY, slow_s=10)
    with sim_server as server, pytest.raises(SimulatorError, match=why) as info:
        fast(server.base_url, timeout_s=0.5).reply(TASK, DIALOGUE, Progress())
    assert info.value.endpoint == server.base_url and f"user simulator {server.base_url}" in str(info.value)
    assert server.count == 2


@pytest.mark.parametrize(("fault", "reply"), [("content_parts", REPLY), ("tokens_nan", REPLY)])
def test_a_reply_with_text_is_taken_whatever_else_is_odd(fault: str, reply: str) -> None:
    # content parts are joined; a NaN count does not matter
    with SimServer(faults=[fault], reply=REPLY) as server:
        assert fast(server.base_url).reply(TASK, DIALOGUE, Progress()) == reply.strip()
    assert server.count == 1


# (the replies' faults, what the customer says, whether it is marked cut, the max_tokens each request asked for)
CUT = [
    ([], REPLY, False, [512]),  # whole at once
    (["length_text"], REPLY, False, [512, 1024]),  # cut, asked again with twice the tokens: whole
    (["length_text", "length_text"], REPLY[: len(REPLY) // 2].strip(), True, [512, 1024]),  # cut twice: kept, marked
]


@pytest.mark.parametrize(("faults", "said", "cut", "asked"), CUT)
def test_a_reply_cut_at_the_token_cap_is_asked_for_again_then_marked(faults, said, cut, asked) -> None:
    progress = Progress()
    with SimServer(faults=faults, reply=REPLY) as server:
        assert fast(server.base_url).reply(TASK, DIALOGUE, progress) == said
    assert progress.cut is cut and [body["max_tokens"] for body in server.requests] == asked


LONE = f"{REPLY} {chr(0xD800)}"  # a lone surrogate: what json.loads makes of a model's "\ud800"


@pytest.mark.parametrize(("replies", "said"), [([LONE, REPLY], REPLY), ([LONE, LONE], None)])
def test_a_reply_with_a_lone_surrogate_is_retried_then_a_simulator_error(replies: list[str], said: str | None) -> None:
    # Not text: no log, cache or report could hold it (it used to stop the run when its episode was logged).
    answers = iter(replies)
    with SimServer(reply=lambda body: next(answers)) as server:
        if said is None:
            with pytest.raises(SimulatorError, match="lone surrogate"):
                fast(server.base_url).reply(TASK, DIALOGUE, Progress())
        else:
            assert fast(server.base_url).reply(TASK, DIALOGUE, Progress()) == said
    assert server.count == 2


def test_an_empty_simulator_ends_the_episode_as_user_sim_error() -> None:
    with SimServer(faults=["empty", "null"], reply=REPLY) as server:
        result = run_episode(RETAIL, TASK, lambda messages: "done", fast(server.base_url), RolloutLimits())
    assert result.infos.termination == "user_sim_error" and server.base_url in result.infos.error


def test_an_unknown_model_stops_at_its_404_naming_what_it_serves() -> None:
    unknown = r"user simulator .*HTTP 404 for model 'x'.*it serves \['sim'\]"
    with SimServer(models=["sim"]) as server, pytest.raises(EndpointConfigError, match=unknown):
        fast(server.base_url, model="x").reply(TASK, DIALOGUE, Progress())
    assert server.count == 1  # never retried

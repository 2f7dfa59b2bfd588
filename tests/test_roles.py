"""The JSON roles (tool, memory, proposer, judge) over real HTTP: answers read out of a model's text, refusals sent
back, the reply store that makes a run replay, and the breaker that stops calling a dead endpoint."""

from __future__ import annotations

import doctest
import importlib
import json
import time
from pathlib import Path

import pytest
from sim_server import SimServer, free_port

from rewardkit.loop.endpoint import ChatEndpoint, EndpointSettings
from rewardkit.loop.judge import Judge
from rewardkit.loop.replies import ReplyStore
from rewardkit.loop.roles import JsonRole, RoleError, parse_json


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),  # a fenced block
        ('<think>{"a": 2} first?</think> Sure: {"a": 1} done', {"a": 1}),  # the reasoning is not the answer
        ("[1, 2]", [1, 2]),
        ('{"a": 1} {"b": 2}', {"a": 1}),  # the first object; the rest is ignored
    ],
)
def test_an_answer_is_the_json_in_the_text(text: str, value: object) -> None:
    assert parse_json(text) == (value, None)


@pytest.mark.parametrize(("text", "why"), [("", "no JSON object"), ('{"a": ', "not valid JSON"), ("no", "no JSON")])
def test_an_answer_without_json_says_why(text: str, why: str) -> None:
    value, problem = parse_json(text)
    assert value is None and why in problem


def positive(value: object) -> str | None:
    return None if isinstance(value, dict) and value.get("n", 0) > 0 else "n must be > 0"


def test_a_refused_answer_is_sent_back_with_its_problem() -> None:
    answers = iter(['{"n": -1}', "not json", '{"n": 3}'])
    with SimServer(reply=lambda body: next(answers)) as server:
        role = JsonRole("tool", server.base_url, "sim")
        assert role.ask([{"role": "user", "content": "n?"}], positive) == {"n": 3}
        third = server.requests[2]["messages"]
    # 3 requests, 2 refused; the third carries both earlier answers and both problems.
    summary = role.ledger.summary()
    assert (summary["requests"], summary["invalid"]) == (3, 2)
    assert [m["role"] for m in third] == ["user", "assistant", "user", "assistant", "user"]
    assert "n must be > 0" in third[2]["content"] and "no JSON object" in third[4]["content"]


LONE = chr(0xD800)  # a lone surrogate, as json.loads makes one of "\ud800"


@pytest.mark.parametrize(
    "answer",
    ['{"n": 1, "note": "\\ud800"}', '{"n": 1, "\\udc00": 1}', f'<think>{LONE}</think>{{"n": 1}}'],
    ids=["escaped-in-a-value", "escaped-in-a-key", "in-the-text"],
)
def test_an_answer_with_a_lone_surrogate_is_refused_and_asked_again(tmp_path: Path, answer: str) -> None:
    """Every role's rule, before its own check: an answer no store, log or report could hold is refused."""
    answers = iter([answer, '{"n": 2}'])
    with SimServer(reply=lambda body: next(answers)) as server:
        role = JsonRole("judge", server.base_url, "sim", cache=ReplyStore(tmp_path / "roles.sqlite"))
        assert role.ask([{"role": "user", "content": "n?"}], positive) == {"n": 2}
        again = server.requests[1]["messages"]
    assert role.ledger.summary()["invalid"] == 1 and "lone surrogate" in again[-1]["content"]


def test_an_answer_never_accepted_is_a_role_error() -> None:
    with SimServer(reply='{"n": 0}') as server:
        role = JsonRole("judge", server.base_url, "sim", attempts=2)
        with pytest.raises(RoleError, match="no acceptable answer in 2 attempt"):
            role.ask([{"role": "user", "content": "n?"}], positive)
        assert server.count == 2


def test_the_store_replays_an_accepted_answer_and_sends_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "roles.sqlite"
    messages = [{"role": "user", "content": "n?"}]
    with SimServer(reply='{"n": 5}') as server:
        first = JsonRole("tool", server.base_url, "sim", cache=ReplyStore(cache))
        assert first.ask(messages, positive) == {"n": 5}
        again = JsonRole("tool", server.base_url, "sim", cache=ReplyStore(cache))
        assert again.ask(messages, positive) == {"n": 5}
        assert (server.count, again.ledger.summary()["cache_hits"]) == (1, 1)
        down = server.base_url
    # Replay, the same options with the server gone: the stored answer; a request never seen is a RoleError.
    replay = JsonRole("tool", down, "sim", cache=ReplyStore(cache, mode="replay"))
    assert replay.ask(messages, positive) == {"n": 5}
    with pytest.raises(RoleError, match="no stored answer"):
        replay.ask([{"role": "user", "content": "another"}], positive)
    # Another prompt version is another fingerprint: its answers are not the old ones.
    other = JsonRole("tool", down, "sim", cache=ReplyStore(cache, mode="replay"), version=2)
    with pytest.raises(RoleError, match="no stored answer"):
        other.ask(messages, positive)


def test_the_breaker_stops_calling_a_dead_endpoint_then_tries_again() -> None:
    settings = EndpointSettings(retries=0, timeout_s=2.0, breaker_after=2, breaker_cooldown_s=0.5)
    down = f"http://127.0.0.1:{free_port()}/v1"
    endpoint = ChatEndpoint(down, "sim", lambda url, why: RuntimeError(why), settings)
    for _ in range(3):
        with pytest.raises(RuntimeError):
            endpoint.complete([{"role": "user", "content": "hi"}])
    # 2 calls reached the (dead) port and failed; the 3rd was refused at once.
    summary = endpoint.ledger.summary()
    assert (summary["requests"], summary["failures"], summary["short_circuited"]) == (2, 2, 1)
    time.sleep(0.6)  # the cooldown is over: one call is let through again
    with pytest.raises(RuntimeError):
        endpoint.complete([{"role": "user", "content": "hi"}])
    assert endpoint.ledger.summary()["requests"] == 3


def test_a_judge_keeps_its_reason_and_whose_fault() -> None:
    verdicts = iter(["maybe", '{"verdict": "reject", "reason": "wrong card", "fault": "agent"}'])
    with SimServer(reply=lambda body: next(verdicts)) as server:
        judge = Judge(JsonRole("judge", server.base_url, "sim"))
        verdict = judge.judge("Judge the refund.", "the transcript")
    assert verdict.as_dict() == {"verdict": "reject", "reason": "wrong card", "fault": "agent"}
    assert judge.ledger.summary()["invalid"] == 1
    assert json.loads(json.dumps(verdict.as_dict()))["fault"] == "agent"


@pytest.mark.parametrize(
    "name", ["rewardkit.loop.roles", "rewardkit.loop.judge", "rewardkit.envs.memory", "rewardkit.runs.tasks.blueprints"]
)
def test_the_docstring_examples_of_the_b1_modules_hold(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module)
    assert result.attempted > 0 and result.failed == 0

"""The gold agent (rewardkit.loop.gold) with the scripted user: it proposes a write its user declines and drops it,
refuses a write it must not make, closes a plain task with "done", and ends each on the gold state."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import pytest

from rewardkit.envs import get_domain
from rewardkit.envs.approvals import DECLINE
from rewardkit.envs.task_verdict import gold_outcome
from rewardkit.envs.tool_calls import tool_calls
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import EpisodeResult, run_episode
from rewardkit.loop.gold import LINES, GoldAgent, hermes_call
from rewardkit.loop.user_sim.scripted import ScriptedSimulator

LIVESTREAM = get_domain("livestream").tasks()
# Retail task 73 (one return, no output) with a cancellation it must refuse: an English refused entry.
REFUSING = copy.deepcopy(get_domain("retail").tasks()["73"]) | {"id": "73-refusing"}
REFUSING["evaluation_criteria"]["actions"].append(
    {
        "name": "cancel_pending_order",
        "arguments": {"order_id": "#W5272531", "reason": "no longer needed"},
        "outcome": "refused",
        "rule": "ORDER_DELIVERED",
    }
)


def episode(domain: str, task: Mapping[str, Any]) -> EpisodeResult:
    return run_episode(get_domain(domain), task, GoldAgent(task), ScriptedSimulator(), RolloutLimits())


def sent(messages: list[dict[str, Any]], name: str, arguments: Mapping[str, Any]) -> list[int]:
    """Indexes of the assistant messages that call ``name`` with exactly ``arguments``."""
    return [
        i
        for i, m in enumerate(messages)
        if m["role"] == "assistant"
        and any(c.name == name and dict(c.arguments) == dict(arguments) for c in tool_calls([m]))
    ]


def said(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant" and "<tool_call>" not in m["content"]]


@pytest.mark.parametrize(
    ("task_id", "declined"),
    [
        ("t16", [("change_price", {"sku": "SP002", "new_price": 169})]),  # a price cut the streamer declines
        ("t18", [("change_price", {"sku": "SP007", "new_price": 62.9})]),  # declined, then a coupon goes out
        (
            "t47",
            [
                ("change_price", {"sku": "SP015", "new_price": 62}),  # two declined among four writes
                ("put_product_on_air", {"room_id": "R102", "sku": "SP016"}),
            ],
        ),
    ],
)
def test_a_declined_write_is_asked_declined_and_not_sent_again(task_id: str, declined: list) -> None:
    task = LIVESTREAM[task_id]
    result = episode("livestream", task)
    messages = result.messages
    for name, arguments in declined:
        entry = next(
            a
            for a in task["evaluation_criteria"]["actions"]
            if a["name"] == name and {k: v for k, v in a["arguments"].items() if k != "idempotency_key"} == arguments
        )
        [at] = sent(messages, name, entry["arguments"])  # sent once: never again after the user declined
        error = json.loads(messages[at + 1]["content"])["error"]
        assert messages[at + 1]["role"] == "tool" and error["code"] == "APPROVAL_REQUIRED"
        request = f"{error['request_id']}: {error['message']}"
        ask, reply, answer = messages[at + 2 : at + 5]
        assert ask["content"] == LINES["zh"]["ask"].format(request=request)
        assert reply["role"] == "user" and DECLINE in reply["content"]
        assert answer["content"] == LINES["zh"]["declined"].format(request=request)
    assert LINES["zh"]["done"] not in said(messages)[-1]
    assert result.infos.termination == "user_stop"


@pytest.mark.parametrize(
    ("domain", "task", "call", "rule", "output"),
    [
        ("livestream", LIVESTREAM["t19"], "change_price SP021 99", "PRICE_BELOW_COST", "520.00"),
        ("livestream", LIVESTREAM["t42"], "change_price SP013 150", "PRICE_BELOW_COST", "165.00"),  # in a compound
        ("livestream", LIVESTREAM["t28"], "issue_coupon R105 SP010 100", "PLATFORM_DISCOUNT_LIMIT", "30%"),
        ("retail", REFUSING, "cancel_pending_order #W5272531 no longer needed", "ORDER_DELIVERED", None),
    ],
    ids=["t19", "t42", "t28", "retail-en"],
)
def test_a_refused_write_is_never_sent_and_the_refusal_names_it(domain, task, call, rule, output) -> None:
    result = episode(domain, task)
    refused = [a for a in task["evaluation_criteria"]["actions"] if a.get("outcome") == "refused"]
    assert [sent(result.messages, a["name"], a["arguments"]) for a in refused] == [[]]
    assert [c.name for c in tool_calls(result.messages)] == [
        a["name"] for a in task["evaluation_criteria"]["actions"] if a.get("outcome") != "refused"
    ]
    last = said(result.messages)[-1]
    language = "en" if domain == "retail" else "zh"
    refusal = LINES[language]["refuse"].format(call=call, rule=LINES[language]["rule"].format(rule=rule))
    assert refusal in last and (output is None or output in last)
    assert LINES[language]["done"] not in last
    assert result.infos.termination == "user_stop"


@pytest.mark.parametrize(("domain", "task_id"), [("livestream", "t01"), ("livestream", "t13"), ("retail", "73")])
def test_a_plain_task_still_ends_with_done(domain: str, task_id: str) -> None:
    result = episode(domain, get_domain(domain).tasks()[task_id])
    language = "zh" if domain == "livestream" else "en"
    assert said(result.messages)[-1].endswith(LINES[language]["done"])


@pytest.mark.parametrize(
    ("domain", "task"),
    [("livestream", LIVESTREAM[i]) for i in ("t01", "t13", "t16", "t18", "t19", "t28", "t42", "t47")]
    + [("retail", REFUSING)],
    ids=lambda x: x if isinstance(x, str) else x["id"],
)
def test_the_gold_agent_ends_on_the_gold_state(domain: str, task: Mapping[str, Any]) -> None:
    result = episode(domain, task)
    assert result.infos.state_hash == gold_outcome(domain, task).state_hash


HELD = json.dumps({"error": {"code": "APPROVAL_REQUIRED", "message": "NEEDS_OK: a held write", "request_id": "req-1"}})


@pytest.mark.parametrize(
    ("reply", "then"),
    [
        (f"No, I do not approve that. {DECLINE}", "Understood, I have not done it: req-1: NEEDS_OK: a held write"),
        ("Yes, I approve that request. ###APPROVE###", hermes_call("cancel_pending_order", {"order_id": "#W1"})),
        ("What is that?", hermes_call("cancel_pending_order", {"order_id": "#W1"})),  # undecided: asked again
    ],
    ids=["declined", "approved", "undecided"],
)
def test_after_asking_the_agent_resends_unless_the_user_declined(reply: str, then: str) -> None:
    task = {
        "evaluation_criteria": {
            "actions": [{"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}, "outcome": "declined"}],
            "communicate_info": [],
        }
    }
    agent = GoldAgent(task)
    messages = [{"role": "user", "content": "Cancel #W1."}]
    messages += [{"role": "assistant", "content": agent(messages)}, {"role": "tool", "content": HELD}]
    ask = agent(messages)
    assert ask == LINES["en"]["ask"].format(request="req-1: NEEDS_OK: a held write")
    messages += [{"role": "assistant", "content": ask}, {"role": "user", "content": reply}]
    assert agent(messages) == then

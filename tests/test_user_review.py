"""The user review: each rule on dialogues that carry its mistake and on the clean dialogues beside them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.loop.user_review import KINDS, facts, review
from rewardkit.loop.user_sim.base import GREETING, Turn

RETAIL = {
    "user_scenario": {
        "instructions": {
            "reason_for_call": "You want to cancel order #W6779827 because you no longer need it.",
            "known_info": "You are Mia Li, zip code 78705, email mia.li3818@example.com.",
            "task_instructions": "You are polite but brief. If the agent asks for confirmation, you give it.",
            "approval": "approve",
        }
    }
}
LIVESTREAM = {
    "user_scenario": {
        "instructions": {
            "reason_for_call": "我是主播小鹿，帮我把直播间R101的智能标题打开。",
            "task_instructions": "你说话干脆，事情办完就结束对话。",
            "approval": "decline",
        }
    }
}


def talk(*lines: str) -> list[Turn]:
    """A dialogue from alternating lines, the user first (after the agent's greeting)."""
    return [Turn("agent", GREETING), *(Turn("user" if i % 2 == 0 else "agent", t) for i, t in enumerate(lines))]


# (task, language, dialogue, the flags as (kind, turn, evidence))
CASES = [
    # clean: the user gives what it was given, agrees, and stops after the agent says it is done
    (
        RETAIL,
        "en",
        talk(
            "Hi, I want to cancel order #W6779827.",
            "Can you confirm the order id and the reason?",
            "Yes, #W6779827, I no longer need it.",
            "Done: the order is cancelled and refunded. Anything else?",
            "No, thanks. ###STOP###",
        ),
        [],
    ),
    # the order id the agent read out, repeated by the user: seen
    (
        RETAIL,
        "en",
        talk("Cancel my last order.", "Your last order is #W1234567 for 466.75.", "Yes, cancel #W1234567."),
        [],
    ),
    # premature stop: the agent asks to confirm, the user agrees and stops in the same message (turn 3)
    (
        RETAIL,
        "en",
        talk("Cancel order #W6779827.", "Shall I cancel it now?", "Yes, go ahead. ###STOP###"),
        [("premature_stop", 3, None)],
    ),
    # ... and after an announcement; "let me know" announces nothing
    (RETAIL, "en", talk("Cancel #W6779827.", "I'll cancel it now.", "Ok ###STOP###"), [("premature_stop", 3, None)]),
    (RETAIL, "en", talk("Cancel #W6779827.", "Cancelled. Let me know if you need more.", "Ok ###STOP###"), []),
    # declining and stopping is the user's right
    (RETAIL, "en", talk("Cancel #W6779827.", "Shall I cancel it now?", "No, leave it. ###STOP###"), []),
    # an unseen fact: an order id, a number and an e-mail the user was never given (each once)
    (
        RETAIL,
        "en",
        talk(
            "Cancel #W6779827 and #W7654321.",
            "Which e-mail is on the account?",
            "It is mia@other.org, and my zip is 90210. Also #W7654321.",
        ),
        [("unseen_fact", 1, "#W7654321"), ("unseen_fact", 3, "mia@other.org"), ("unseen_fact", 3, "90210")],
    ),
    # its own scenario's zip code and e-mail are known
    (RETAIL, "en", talk("I'm Mia Li, zip 78705, mia.li3818@example.com; cancel #W6779827."), []),
    # role breaks: a tool call, the agent's voice, a field name, a quote of the instructions
    (RETAIL, "en", talk('<tool_call>{"name": "cancel_pending_order"}</tool_call>'), [("role_break", 1, "a tool call")]),
    (RETAIL, "en", talk("How can I help you with the order?"), [("role_break", 1, "How can I help you")]),
    (RETAIL, "en", talk("My known_info says I am Mia."), [("role_break", 1, "known_info")]),
    (
        RETAIL,
        "en",
        talk("You are polite but brief. If the agent asks for confirmation, you give it. Cancel it."),
        [("role_break", 1, "You are polite but brief. If the agent asks for confirmation, you")],
    ),
    # approvals: the scenario approves, so a decline is wrong; the live-stream one declines
    (RETAIL, "en", talk("###DECLINE###"), [("wrong_approval", 1, "decline_request where the scenario says approve")]),
    (RETAIL, "en", talk("###APPROVE###"), []),
    (
        LIVESTREAM,
        "zh",
        talk("帮我打开R101的智能标题。", "需要您批准。", "###APPROVE###"),
        [("wrong_approval", 3, "approve_request where the scenario says decline")],
    ),
    # language: English in a Chinese domain, Chinese in an English one; identifiers and markers do not count
    (LIVESTREAM, "zh", talk("Please turn on the smart title for R101."), [("wrong_language", 1, None)]),
    (LIVESTREAM, "zh", talk("帮我打开R101的智能标题。", "好的，已打开。", "OK ###STOP###"), []),
    (RETAIL, "en", talk("请取消我的订单 #W6779827。"), [("wrong_language", 1, None)]),
    # a Chinese quote of how it must behave: 12 characters in a row; its reason for calling, said word for word, is
    # what it is there to say
    (
        LIVESTREAM,
        "zh",
        talk("我是主播小鹿。你说话干脆，事情办完就结束对话。"),
        [("role_break", 1, "你说话干脆，事情办完就结")],
    ),
    (LIVESTREAM, "zh", talk("我是主播小鹿，帮我把直播间R101的智能标题打开。"), []),
]


@pytest.mark.parametrize(("task", "language", "dialogue", "expected"), CASES)
def test_each_rule_flags_its_mistake_and_nothing_else(
    task: dict[str, Any], language: str, dialogue: list[Turn], expected: list[tuple[str, int, str | None]]
) -> None:
    found = review(task, dialogue, language=language)
    assert [(f.kind, f.turn) for f in found] == [(k, t) for k, t, _ in expected]
    for flag, (_, _, evidence) in zip(found, expected, strict=True):
        assert evidence is None or flag.evidence == evidence


def test_tool_results_count_as_seen() -> None:
    dialogue = talk("Cancel the order with item 1586641416.")
    assert [f.kind for f in review(RETAIL, dialogue, language="en")] == ["unseen_fact"]
    assert review(RETAIL, dialogue, language="en", tool_texts=['{"item_id": "1586641416"}']) == ()


def test_only_the_wanted_kinds_run() -> None:
    dialogue = talk("###DECLINE### and cancel #W7654321.")
    assert [f.kind for f in review(RETAIL, dialogue, language="en")] == ["unseen_fact", "wrong_approval"]
    assert [f.kind for f in review(RETAIL, dialogue, language="en", kinds=["wrong_approval"])] == ["wrong_approval"]
    assert set(KINDS) == {"premature_stop", "unseen_fact", "role_break", "wrong_approval", "wrong_language"}


# (text, its facts): the most specific pattern wins, each fact once
FACTS = [
    ("Order #W6779827, user mia_li_3668.", ["#W6779827", "mia_li_3668"]),
    ("Write to a.b@example.com about SKU SP002.", ["a.b@example.com", "SP002"]),
    ("It cost $1,234.56 and 99 cents.", ["234.56"]),  # "1," and "99" are too short to check; the rest is a number
    ("No facts here, just 42 words.", []),
]


@pytest.mark.parametrize(("text", "expected"), FACTS)
def test_facts(text: str, expected: list[str]) -> None:
    assert facts(text) == expected


@settings(max_examples=200, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=300), min_size=1, max_size=6),
    language=st.sampled_from(["en", "zh"]),
)
def test_any_dialogue_is_reviewed_and_never_raises(texts: list[str], language: str) -> None:
    # A simulated user (and the agent) may write anything: the review answers with well-formed flags, never an error.
    dialogue = talk(*texts)
    for flag in review(RETAIL, dialogue, language=language, tool_texts=texts):
        assert flag.kind in KINDS and 0 < flag.turn < len(dialogue) and isinstance(flag.evidence, str)


def test_a_page_of_garbage_is_read_to_the_end() -> None:
    # Every fact pattern starts only where a run of its characters starts: a 100,000-character reply of numbers,
    # e-mail fragments and letters is read in linear time (quadratic patterns took minutes on it), and its unseen
    # facts are named, at most MAX_UNSEEN of them for the message.
    from rewardkit.loop.user_review import MAX_UNSEEN

    garbage = " ".join(f"{100 + i} a@b.c{i} x_y_{i:03d}" for i in range(4000))
    flags = review(RETAIL, talk(garbage), language="en")
    assert [f.kind for f in flags] == ["unseen_fact"] * MAX_UNSEEN


# --- the model reviewer: a real HTTP endpoint answering the judge's JSON ------------------------------------------


def model_reviewer(server: Any) -> Any:
    from rewardkit.loop.user_review import make_reviewer
    from rewardkit.loop.user_sim.config import UserSimConfig

    return make_reviewer(UserSimConfig(review_url=server.base_url, review_model="m", retries=0, backoff_s=0.0))


CLEAN = talk("Hi, I want to cancel order #W6779827.", "Done, it is cancelled.", "Thanks. ###STOP###")
# (the reviewer's answer, the flags it gives as (kind, turn, evidence))
VERDICTS = [
    ('{"verdict": "accept", "reason": "the user kept to its scenario"}', []),
    (  # the user's fault: one flag at its last message (turn 3), the reason as evidence
        '{"verdict": "reject", "reason": "it asked for a refund to a card it was never given", "fault": "user"}',
        [("model_review", 3, "it asked for a refund to a card it was never given")],
    ),
    (
        '{"verdict": "reject", "reason": "no reason given for whose fault", "fault": null}',
        [("model_review", 3, "no reason given for whose fault")],
    ),
    ('{"verdict": "reject", "reason": "the agent skipped authentication", "fault": "agent"}', []),  # not the user's
]


@pytest.mark.parametrize(("answer", "expected"), VERDICTS)
def test_the_model_reviewer_flags_the_users_fault_only(answer: str, expected: list[tuple[str, int, str]]) -> None:
    from sim_server import SimServer

    with SimServer(reply=answer) as server:
        flags = model_reviewer(server).review(RETAIL, CLEAN, language="en", tool_texts=["tool get_order: {}"])
        [request] = server.requests
    assert [(f.kind, f.turn, f.evidence) for f in flags] == expected
    subject = request["messages"][-1]["content"]  # the scenario, the dialogue and the tool results, in one message
    assert "#W6779827" in subject and "user: Thanks. ###STOP###" in subject and "tool get_order" in subject


def test_a_reviewer_that_never_answers_in_json_is_a_role_error_after_its_attempts() -> None:
    from sim_server import SimServer

    from rewardkit.loop.roles import RoleError

    with SimServer(reply="I think the user was fine.") as server, pytest.raises(RoleError, match="user_review"):
        model_reviewer(server).review(RETAIL, CLEAN, language="en")
    assert len(server.requests) == 3  # the judge's three attempts, each told what was wrong


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"review_url": "http://127.0.0.1:1/v1"}, "review_model"),  # a reviewer needs its model
        ({"review_url": "127.0.0.1:8001", "review_model": "m"}, "review_url"),  # not an http(s) URL
    ],
)
def test_a_reviewer_misconfigured_is_refused_naming_the_key(raw: dict[str, Any], key: str) -> None:
    from rewardkit.config import ConfigError
    from rewardkit.loop.user_sim.config import load_user_sim_config

    with pytest.raises(ConfigError, match=f"user_sim.{key}"):
        load_user_sim_config(raw, "test")

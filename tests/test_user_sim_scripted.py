"""The scripted (model-free) customer, over every real tau2 retail task."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from rewardkit.envs.retail import DATA_DIR
from rewardkit.envs.scenario import first_person
from rewardkit.loop.user_sim import GREETING, STOP, TRANSFER, Progress, Turn
from rewardkit.loop.user_sim.scripted import PHRASES, ScriptedSimulator

TASKS: list[dict[str, Any]] = json.loads((DATA_DIR / "tasks.json").read_text(encoding="utf-8"))
SIM = ScriptedSimulator()
EMAIL = re.compile(r"[\w.]+@[\w.]+\w")


def instructions(task: dict[str, Any]) -> dict[str, Any]:
    return task["user_scenario"]["instructions"]


NO_PROGRESS = Progress()


def after(task: dict[str, Any], agent: str, progress: Progress = NO_PROGRESS) -> str:
    """The reply to ``agent`` once the customer has opened the conversation."""
    opening = SIM.reply(task, [Turn("agent", GREETING)], Progress())
    return SIM.reply(task, [Turn("agent", GREETING), Turn("user", opening), Turn("agent", agent)], progress)


def test_opening_states_the_request_in_first_person() -> None:
    for task in TASKS:
        first = SIM.reply(task, [Turn("agent", GREETING)], Progress())
        reason = instructions(task)["reason_for_call"]
        assert first and not re.search(r"\b(?:You|you|Your|your)\b", first), (task["id"], first)
        assert not first.startswith("."), task["id"]
        for order in re.findall(r"#W\d+", reason):
            assert order in first, (task["id"], order)
        # Identity is given when asked, not volunteered (unlike the GRPO dataset's opening turn).
        for email in EMAIL.findall(instructions(task).get("known_info") or ""):
            assert email not in first, (task["id"], email)


def test_opening_of_the_first_task() -> None:
    first = SIM.reply(TASKS[0], [Turn("agent", GREETING)], Progress())
    assert first.startswith("I received my order #W2378156 and wish to exchange the mechanical keyboard")
    assert "Yusuf Rossi" not in first


IDENTITY_QUESTIONS = [
    "Could you give me your email or name and zip code?",
    "To locate your account, please provide your user id.",
    "I need to authenticate you first. What is your e-mail address?",
]


@pytest.mark.parametrize("question", IDENTITY_QUESTIONS)
def test_identity_question_gets_known_info_only(question: str) -> None:
    for task in TASKS:
        known = instructions(task)["known_info"]
        answer = after(task, question)
        assert answer == first_person(known.strip()), task["id"]
        for email in EMAIL.findall(known):
            assert email in answer


def test_known_info_of_the_first_task() -> None:
    assert (
        after(TASKS[0], "Could you give me your email or name and zip code?") == "I am Yusuf Rossi in zip code 19122."
    )


@pytest.mark.parametrize(
    "question",
    [
        "I will exchange the keyboard for item 123. Do you confirm (yes/no)?",
        "Shall I proceed with the cancellation?",
        "Would you like me to place the order?",
        "Should I go ahead?",
    ],
)
def test_confirmation_question(question: str) -> None:
    assert after(TASKS[0], question) == PHRASES["en"].go_ahead


def test_other_messages_restate_the_request() -> None:
    opening = SIM.reply(TASKS[0], [Turn("agent", GREETING)], Progress())
    assert after(TASKS[0], "Thanks for waiting.").endswith(opening)


def test_stop_only_when_state_done_and_outputs_said() -> None:
    for progress, stops in [
        (Progress(True, True), True),
        (Progress(True, False), False),
        (Progress(False, True), False),
    ]:
        assert after(TASKS[0], "Your exchange is done.", progress).endswith(STOP) is stops


@pytest.mark.parametrize(
    ("agent", "transferred"),
    [
        ("YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.", True),
        ("I'm transferring you to a human agent now.", True),
        ("Would you like me to transfer you to a human agent?", False),  # an offer, not a transfer
    ],
)
def test_transfer(agent: str, transferred: bool) -> None:
    assert after(TASKS[0], agent).endswith(TRANSFER) is transferred


def test_never_reveals_unknown_info() -> None:
    questions = [*IDENTITY_QUESTIONS, "Do you remember your email?", "Shall I proceed?", "Anything else?", "Hm."]
    for task in TASKS:
        unknown = instructions(task).get("unknown_info") or ""
        if not re.search(r"\w", unknown):  # absent, or a bare "." (task 37)
            continue
        secret = first_person(unknown.strip().rstrip("."))
        replies = [SIM.reply(task, [Turn("agent", GREETING)], Progress())] + [after(task, q) for q in questions]
        assert not any(secret in r or unknown in r for r in replies), task["id"]


def test_deterministic() -> None:
    fresh = ScriptedSimulator()
    for task in TASKS[:20]:
        for question in [*IDENTITY_QUESTIONS, "Shall I proceed?", "ok"]:
            assert after(task, question) == after(task, question)
    assert fresh.fingerprint() == SIM.fingerprint()
    assert fresh.name == "scripted"


def test_free_text_instructions_and_bad_input() -> None:
    task = {"id": "t", "user_scenario": {"persona": None, "instructions": "You want to cancel order #W1."}}
    assert SIM.reply(task, [Turn("agent", GREETING)], Progress()) == "I want to cancel order #W1."
    assert after(task, "What is your email?").startswith("Sorry")  # nothing known to share
    with pytest.raises(ValueError, match="no user_scenario"):
        SIM.reply({"id": "x"}, [Turn("agent", GREETING)], Progress())
    with pytest.raises(ValueError, match="end with an agent turn"):
        SIM.reply(task, [], Progress())


def _task(approval: str | None, reason: str = "I want the price of P1 lowered to 80.") -> dict[str, Any]:
    found: dict[str, Any] = {"reason_for_call": reason, "known_info": "The product is P1."}
    if approval is not None:
        found["approval"] = approval
    return {"id": "gated", "user_scenario": {"instructions": found}}


WAITING = ('req-1: set_price {"sku": "P1", "price": 80} (PRICE_CHANGE_NEEDS_APPROVAL)',)


@pytest.mark.parametrize(
    ("approval", "language", "marker"),
    [
        ("approve", "en", "###APPROVE###"),
        ("decline", "en", "###DECLINE###"),
        (None, "en", "###DECLINE###"),  # a scenario that says nothing never approves
        ("approve", "zh", "###APPROVE###"),
    ],
)
def test_a_waiting_request_is_answered_as_the_scenario_says(approval, language, marker) -> None:
    reply = after(_task(approval), "Shall I proceed?", Progress(requests=WAITING, language=language))
    assert marker in reply
    assert reply == (PHRASES[language].approve if marker == "###APPROVE###" else PHRASES[language].decline)


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ("请问是哪个商品？", "The product is P1."),  # a question about specifics: the known info
        ("好的，我现在帮您改价，确认执行吗", PHRASES["zh"].go_ahead),
        ("正在为您转接人工客服。", PHRASES["zh"].transferred),
        ("收到。", PHRASES["zh"].as_i_said.format(reason="I want the price of P1 lowered to 80.")),
    ],
)
def test_the_chinese_rules(agent: str, expected: str) -> None:
    assert after(_task("approve"), agent, Progress(language="zh")) == expected


def test_an_unknown_language_fails_loudly() -> None:
    with pytest.raises(ValueError, match="not 'fr'"):
        after(_task("approve"), "ok", Progress(language="fr"))

"""The user review: each rule on dialogues that carry its mistake and on the clean dialogues beside them."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rewardkit.envs import get_domain
from rewardkit.envs.tasks import TaskError
from rewardkit.envs.termination import Termination
from rewardkit.loop.config import RolloutLimits
from rewardkit.loop.drive import run_episodes
from rewardkit.loop.gold import GoldAgent
from rewardkit.loop.user_review import KINDS, agrees, facts, review
from rewardkit.loop.user_sim.base import GREETING, Turn
from rewardkit.loop.user_sim.scripted import ScriptedSimulator
from rewardkit.rewards import TaskCompletion

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


# The tables' dialogues are fragments that never say their scenario's request: every rule but no_request (its own
# table is below) reads them.
FRAGMENT_KINDS = tuple(kind for kind in KINDS if kind != "no_request")


def talk(*lines: str) -> list[Turn]:
    """A dialogue from alternating lines, the user first (after the agent's greeting)."""
    return [Turn("agent", GREETING), *(Turn("user" if i % 2 == 0 else "agent", t) for i, t in enumerate(lines))]


# (task, language, dialogue, the flags as (kind, turn, evidence)); a flag's turn numbers the user's messages from 1:
# in talk("a", "b", "c") the user's "c" is its message 2 (the dialogue's index 3, after the greeting and "b")
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
        [("premature_stop", 2, None)],
    ),
    # ... and after an announcement; "let me know" announces nothing
    (RETAIL, "en", talk("Cancel #W6779827.", "I'll cancel it now.", "Ok ###STOP###"), [("premature_stop", 2, None)]),
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
        [("unseen_fact", 1, "#W7654321"), ("unseen_fact", 2, "mia@other.org"), ("unseen_fact", 2, "90210")],
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
        [("wrong_approval", 2, "approve_request where the scenario says decline")],
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
    found = review(task, dialogue, language=language, kinds=FRAGMENT_KINDS)
    assert [(f.kind, f.turn) for f in found] == [(k, t) for k, t, _ in expected]
    for flag, (_, _, evidence) in zip(found, expected, strict=True):
        assert evidence is None or flag.evidence == evidence


def test_tool_results_count_as_seen() -> None:
    dialogue = talk("Cancel the order with item 1586641416.")
    assert [f.kind for f in review(RETAIL, dialogue, language="en", kinds=FRAGMENT_KINDS)] == ["unseen_fact"]
    seen = ['{"item_id": "1586641416"}']
    assert review(RETAIL, dialogue, language="en", tool_texts=seen, kinds=FRAGMENT_KINDS) == ()


def test_only_the_wanted_kinds_run() -> None:
    dialogue = talk("###DECLINE### and cancel #W7654321.")
    found = review(RETAIL, dialogue, language="en")  # nor does it say the scenario's request
    assert [f.kind for f in found] == ["unseen_fact", "wrong_approval", "no_request"]
    assert [f.kind for f in review(RETAIL, dialogue, language="en", kinds=["wrong_approval"])] == ["wrong_approval"]
    assert set(KINDS) >= {"premature_stop", "unseen_fact", "role_break", "wrong_approval", "wrong_language", "no_stop"}


# (how the episode ended, whether the task is done then): the user went on to the turn limit after the task was done
NO_STOP = [
    (Termination.MAX_TURNS, True, True),  # done, and the customer never stopped: a 0 that is not the agent's
    (Termination.MAX_TURNS, False, False),  # not done at the limit: the agent's failure
    (Termination.MAX_TURNS, None, False),  # no goal to tell (a spec task without one): nothing flagged
    (Termination.USER_STOP, True, False),  # the customer stopped
    (Termination.TOKEN_BUDGET, True, False),  # the agent spent its tokens: its own ending
]


@pytest.mark.parametrize(("ending", "done", "flagged"), NO_STOP)
def test_a_user_that_never_stops_once_the_task_is_done_is_flagged(ending, done, flagged) -> None:
    dialogue = talk("Thanks, could you check that once more?")
    reached = None if done is None else (lambda: done)
    flags = review(RETAIL, dialogue, language="en", kinds=["no_stop"], reached=reached, termination=ending)
    assert [(f.kind, f.turn) for f in flags] == ([("no_stop", 1)] if flagged else [])


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
    users = sum(t.role == "user" for t in dialogue)
    for flag in review(RETAIL, dialogue, language=language, tool_texts=texts):
        assert flag.kind in KINDS and 0 < flag.turn <= users and isinstance(flag.evidence, str)


def test_a_page_of_garbage_is_read_to_the_end() -> None:
    # Every fact pattern starts only where a run of its characters starts: a 100,000-character reply of numbers,
    # e-mail fragments and letters is read in linear time (quadratic patterns took minutes on it), and its unseen
    # facts are named, at most MAX_UNSEEN of them for the message.
    from rewardkit.loop.user_review import MAX_UNSEEN

    garbage = " ".join(f"{100 + i} a@b.c{i} x_y_{i:03d}" for i in range(4000))
    flags = review(RETAIL, talk(garbage), language="en", kinds=FRAGMENT_KINDS)
    assert [f.kind for f in flags] == ["unseen_fact"] * MAX_UNSEEN


# --- agreement: a refusal never agrees, in either language ----------------------------------------------------------

ASKS = {"en": "Shall I cancel order #W6779827 now? Please confirm.", "zh": "请确认：现在取消订单 #W6779827 吗？"}
# (language, the user's stop right after the agent asked to confirm, whether it agrees: a premature stop)
STOPS = [
    ("en", "Yes, go ahead. ###STOP###", True),
    ("en", "No problem, go ahead. ###STOP###", True),  # a set phrase that holds "no" and refuses nothing
    ("en", "ＯＫ，ｇｏ ａｈｅａｄ． ###STOP###", True),  # full-width: the same words
    ("en", "No, do not go ahead with that. ###STOP###", False),  # "go ahead", under "do not"
    ("en", "Don't proceed, I changed my mind. ###STOP###", False),
    ("en", "Yes -- wait, stop, don’t cancel it. ###STOP###", False),  # a curly apostrophe
    ("en", "Okay, never mind, I'm not sure. ###STOP###", False),
    ("zh", "是的，确认。###STOP###", True),
    ("zh", "没问题，确认。###STOP###", True),  # 没 in a set phrase that agrees
    ("zh", "不行，我不确认。###STOP###", False),  # 行 and 确认, under 不
    ("zh", "好的，先别处理了。###STOP###", False),
    ("zh", "可以……算了，不要取消。###STOP###", False),
    ("zh", "请把钱退到我的银行卡。###STOP###", False),  # 行 inside 银行 agrees to nothing
    # putting it off, or keeping things as they are, refuses as plainly as a "no"
    ("en", "OK, maybe later. ###STOP###", False),
    ("en", "Okay, let me think about it. ###STOP###", False),
    ("en", "Sure, hold off for now. ###STOP###", False),
    ("en", "OK, forget it, keep the order. ###STOP###", False),
    ("en", "Okay, I'll pass. ###STOP###", False),
    ("en", "Yes, hmm, I'm unsure. ###STOP###", False),
    ("zh", "好的，我再考虑一下。###STOP###", False),
    ("zh", "好的，改天再说。###STOP###", False),
    ("zh", "好，暂缓吧。###STOP###", False),
    ("en", "Perfect, I'll call back tomorrow to confirm. ###STOP###", False),  # an agreeing word, put off
    ("en", "Great, but please hold that for now. ###STOP###", False),
    ("zh", "好的，我晚点再确认。###STOP###", False),
    ("zh", "感谢，这个先放着。###STOP###", False),
    # set phrases that hold a negation and refuse nothing, and agreeing words beyond yes and ok
    ("en", "Yes, please cancel it, I no longer need it. ###STOP###", True),  # the scenario's own reason
    ("en", "Yes, go ahead. No further questions. ###STOP###", True),
    ("en", "Sounds good. ###STOP###", True),
    ("en", "Alright, perfect. ###STOP###", True),
    ("zh", "好，取消吧。###STOP###", True),  # 好 alone, ending its clause
    ("zh", "好的，没有其他问题了。###STOP###", True),
    # agreement in words no rule lists: the agreement classifier reads it; a question agrees to nothing
    ("en", "Wonderful, thanks a lot! ###STOP###", True),
    ("zh", "妥了，谢谢你。###STOP###", True),
    ("en", "Which card will the refund go to? ###STOP###", False),
]


@pytest.mark.parametrize(("language", "stop", "flagged"), STOPS)
def test_a_stop_is_premature_only_when_it_agrees(language: str, stop: str, flagged: bool) -> None:
    task = RETAIL if language == "en" else LIVESTREAM
    found = review(task, talk("Cancel #W6779827.", ASKS[language], stop), language=language, kinds=["premature_stop"])
    assert [(f.kind, f.turn) for f in found] == ([("premature_stop", 2)] if flagged else [])  # the user's 2nd message


def _full_width(text: str) -> str:
    """ASCII as its full-width form (U+FF01..U+FF5E), the space as the ideographic space: what NFKC undoes."""
    return "".join("\u3000" if c == " " else chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


FORMS = [lambda t: t, str.upper, _full_width, lambda t: t.replace("'", "’")]  # as typed, shouted, full-width, curly
EN_REFUSALS = st.tuples(
    st.sampled_from(["", "Yes, ", "OK ", "Sure -- ", "Sorry, ", "No problem, but "]),  # agreeing words first, too
    st.sampled_from(
        [
            "no, don't",
            "do not",
            "please don't",
            "never",
            "I don't want you to",
            "you can't",
            "I won't let you",
            "please do not",
            "no, wait, don't",
            "stop, do not",
            "hold on, don't",
        ]
    ),
    st.sampled_from(["go ahead", "proceed", "confirm it", "do it", "cancel it", "process the refund", "change it"]),
    st.sampled_from(["", " please", ", thanks", ", sorry", " for now", " yet"]),
    st.sampled_from([".", "!", "", "...", "?!"]),
    st.sampled_from(FORMS),
)
EN_INTERJECTIONS = st.tuples(
    st.sampled_from(["", "Okay -- ", "Yes... ", "Thanks, but "]),
    st.sampled_from(["No", "Nope", "Wait", "Stop", "Cancel that", "Hold on", "Never mind", "Not now"]),
    st.just(""),
    st.sampled_from(["", ", thanks", ", sorry", ", go ahead later"]),
    st.sampled_from([".", "!", ""]),
    st.sampled_from(FORMS),
)
ZH_REFUSALS = st.tuples(
    st.sampled_from(["", "好的，", "是的，", "可以，", "嗯，", "不好意思，", "没问题，但是"]),
    st.sampled_from(["不", "别", "不要", "不行", "不用", "没", "先别", "还是不要", "我不", "不需要", "暂时不"]),
    st.sampled_from(["确认", "继续", "处理", "取消", "办理", "同意", "执行", "修改", ""]),
    st.sampled_from(["", "了", "，谢谢", "，麻烦了", "，抱歉", "吧"]),
    st.sampled_from(["。", "，", "！", ".", "!", "~", ""]),
    st.sampled_from([lambda t: t, _full_width]),
)
ZH_INTERJECTIONS = st.tuples(
    st.sampled_from(["", "好的……", "可以，"]),
    st.sampled_from(["算了", "等等", "等一下", "稍等", "不行", "不用了", "别"]),
    st.just(""),
    st.sampled_from(["", "，谢谢", "，我再想想"]),
    st.sampled_from(["。", "！", ""]),
    st.sampled_from([lambda t: t, _full_width]),
)


def _said(parts: tuple[Any, ...], joint: str) -> str:
    lead, negation, verb, polite, punct, form = parts
    return form(lead + joint.join(p for p in (negation, verb) if p) + polite + punct)


@settings(max_examples=400, deadline=None)
@given(
    parts=st.one_of(
        st.tuples(st.just("en"), st.just(" "), EN_REFUSALS | EN_INTERJECTIONS),
        st.tuples(st.just("zh"), st.just(""), ZH_REFUSALS | ZH_INTERJECTIONS),
    ),
    stop_first=st.booleans(),
)
def test_a_refusal_never_agrees(parts: tuple[str, str, tuple[Any, ...]], stop_first: bool) -> None:
    # Negations x verbs x politeness x the stop marker's place x punctuation and typed forms: every one refuses, so
    # none agrees, and a stop with it right after a confirmation request is the user's right, not a premature stop.
    language, joint, refusal = parts
    said = _said(refusal, joint)
    stop = f"###STOP### {said}" if stop_first else f"{said} ###STOP###"
    task = RETAIL if language == "en" else LIVESTREAM
    assert not agrees(stop), stop
    assert review(task, talk("Cancel it.", ASKS[language], stop), language=language, kinds=["premature_stop"]) == ()


@settings(max_examples=200, deadline=None)
@given(
    parts=st.one_of(
        st.tuples(
            st.just("en"),
            st.sampled_from(["Yes", "Sure", "OK", "Okay", "Go ahead", "Please do", "Proceed", "Yep", "Confirmed"]),
            st.sampled_from(["", ", thanks", ", thank you", ", please", ". Great", ", go ahead"]),
            st.sampled_from(FORMS),
        ),
        st.tuples(
            st.just("zh"),
            st.sampled_from(["是的", "好的", "可以", "没问题", "确认", "行", "嗯，好的", "那就确认吧"]),
            st.sampled_from(["", "，谢谢", "，麻烦了", "，辛苦了", "，就这样吧"]),
            st.sampled_from([lambda t: t, _full_width]),
        ),
    ),
    punct=st.sampled_from([".", "!", "", "。", "！"]),
)
def test_an_agreement_agrees_however_it_is_typed(parts: tuple[str, str, str, Any], punct: str) -> None:
    # The other side of the rule: a plain yes stays a yes (the faulty simulator's premature stops are of this form).
    language, word, polite, form = parts
    stop = form(word + polite + punct) + " ###STOP###"
    task = RETAIL if language == "en" else LIVESTREAM
    found = review(task, talk("Cancel it.", ASKS[language], stop), language=language, kinds=["premature_stop"])
    assert agrees(stop) and [f.kind for f in found] == ["premature_stop"]


# --- role breaks: the agent's voice, never the customer's own report -------------------------------------------------

# (language, the user's message, the role break's evidence, or None where the customer speaks for itself)
VOICES = [
    ("en", "I have updated my address on the website, can you check it?", None),  # what it did to its own
    ("en", "I have cancelled my other subscription already.", None),
    ("en", "I have processed the return label myself.", None),
    ("en", "I can spell it for you: M-I-A.", None),
    ("en", "Let me check my order number.", None),
    ("en", "I have updated your address.", "I have updated your"),  # what is the customer's: the agent's voice
    ("en", "I’ve cancelled your order for you.", "I’ve cancelled your"),
    ("en", "Let me check your order.", "Let me check your"),
    ("en", "I can look that up for you.", "I can look that up for you"),
    ("en", "How can I help you with the order?", "How can I help you"),
    ("zh", "我已经修改了我的地址。", None),
    ("zh", "我已经为您取消了订单。", "我已经为您"),
    ("zh", "我已经取消了您的订单。", "我已经取消了您的"),
    ("zh", "请问有什么可以帮您？", "请问有什么可以帮您"),
    # the same voice, with an adverb between, the object named, or the informal 你
    ("en", "I've gone ahead and cancelled your order.", "I've gone ahead and cancelled your"),
    (
        "en",
        "I have successfully cancelled the order #W6779827 for you.",
        "I have successfully cancelled the order #W6779827 for you",
    ),
    ("en", "I'll process the refund for you now.", "I'll process the refund for you"),
    ("zh", "我已经帮你取消了。", "我已经帮你"),
    ("zh", "我已经取消了你的订单。", "我已经取消了你的"),
    ("en", "I have cancelled the other order myself.", None),  # the customer's own, no "for you"
]


@pytest.mark.parametrize(("language", "said", "evidence"), VOICES)
def test_the_agents_voice_is_a_role_break_and_the_customers_own_report_is_not(
    language: str, said: str, evidence: str | None
) -> None:
    task = RETAIL if language == "en" else LIVESTREAM
    found = review(task, talk(said), language=language, kinds=["role_break"])
    assert [f.evidence for f in found] == ([] if evidence is None else [evidence])


SAID_BY_THE_AGENT = "The order has been cancelled and a refund is on its way to you."  # the classifier: P(agent) 0.87


@pytest.mark.parametrize(
    ("given", "flagged"),
    [
        ({}, True),  # the agent's voice, in words no set phrase matches
        ({"reason_for_call": SAID_BY_THE_AGENT}, False),  # the scenario's own words, said as given: the customer's
        ({"known_info": SAID_BY_THE_AGENT}, False),
    ],
)
def test_the_scenarios_own_words_are_never_the_agents_voice(given: dict, flagged: bool) -> None:
    task = {"user_scenario": {"instructions": {"domain": "retail", **given}}}
    found = review(task, talk(SAID_BY_THE_AGENT), language="en", kinds=["role_break"])
    assert [f.kind for f in found] == (["role_break"] if flagged else [])


# --- facts: one form, whatever the characters it was typed in ---------------------------------------------------

FULL_WIDTH_TASK = {"user_scenario": {"instructions": {"reason_for_call": "Cancel order ＃Ｗ６７７９８２７."}}}
# (task, language, the user's message, its unseen facts): compared in NFKC form with ASCII digits, and named so
FACT_FORMS = [
    (LIVESTREAM, "zh", "帮我打开R１０１的智能标题。", []),  # full-width digits: its scenario's R101
    (RETAIL, "en", "Cancel ＃Ｗ６７７９８２７ please.", []),
    (
        RETAIL,
        "en",
        "Zip ７８７０５,\u3000e-mail ｍｉａ．ｌｉ３８１８＠ｅｘａｍｐｌｅ．ｃｏｍ.",
        [],
    ),  # an ideographic space
    (RETAIL, "en", "My zip is ٧٨٧٠٥.", []),  # Arabic-Indic digits
    (FULL_WIDTH_TASK, "en", "Cancel #W6779827.", []),  # the scenario typed full-width, the user in ASCII
    (RETAIL, "en", "Also cancel ＃Ｗ９９９９９１７.", ["#W9999917"]),  # never given: named in its ASCII form
    # invisible format characters (zero-width space, soft hyphen, word joiner, BOM) are no part of a fact
    (RETAIL, "en", "Cancel #W999\u200b9917.", ["#W9999917"]),  # one id, not "#W999" and "9917"
    (RETAIL, "en", "Cancel #W9999\u00ad917 and #W\u20606779827\ufeff.", ["#W9999917"]),
    (RETAIL, "en", "My zip is 78\u200b705.", []),  # the scenario's 78705, not an unseen 705
]


@pytest.mark.parametrize(("task", "language", "said", "unseen"), FACT_FORMS)
def test_a_fact_is_the_same_in_any_typed_form(
    task: dict[str, Any], language: str, said: str, unseen: list[str]
) -> None:
    found = review(task, talk(said), language=language, kinds=["unseen_fact"])
    assert [f.evidence for f in found] == unseen


# --- the flag's turn: the user's message, found in the episode log ------------------------------------------------


# (the mistake, the faulty simulator's lines for it, whether the log holds the message: seed 3 makes each in the
# user's 2nd message; its unseen fact comes before the user's own stop, which ends the episode unseen by the policy)
IN_THE_LOG = [
    ("unseen_fact", "unseen_fact", False),
    ("role_break", "role_break", True),
    ("wrong_language", "other_language", True),
]


@pytest.mark.parametrize(("kind", "line", "logged"), IN_THE_LOG)
def test_a_flags_turn_names_the_users_message_in_the_episode_log(kind: str, line: str, logged: bool) -> None:
    # A real episode: the gold agent, the scripted user making one mistake of `kind` after its opening. The log's
    # messages hold a system prompt and tool results the simulator never saw, and no greeting; the flag's turn, the
    # user's message number, names the message that carries the mistake there (the faulty simulator's line). A
    # message that stopped the conversation is the result's closing, numbered after the messages the policy saw.
    from rewardkit.envs import get_domain
    from rewardkit.loop.config import RolloutLimits
    from rewardkit.loop.drive import run_episode
    from rewardkit.loop.gold import GoldAgent
    from rewardkit.loop.user_sim.faulty import LINES, FaultySimulator
    from rewardkit.loop.user_sim.scripted import ScriptedSimulator

    domain = get_domain("retail")
    task = domain.tasks()["0"]
    simulator = FaultySimulator(ScriptedSimulator(), kinds=[kind], rate=1.0, seed=3)
    result = run_episode(domain, task, GoldAgent(task), simulator, RolloutLimits(user_review="count"))
    users = [m["content"] for m in result.messages if m["role"] == "user"]
    [flag] = [f for f in result.infos.user_flags if f["kind"] == kind]
    assert flag["turn"] == 2 and (flag["turn"] <= len(users)) == logged
    assert result.closing is not None and result.closing.endswith("###STOP###")  # the stop the policy never saw
    flagged = [*users, result.closing][flag["turn"] - 1]
    assert result.infos.termination == "user_stop" and any(made in flagged for made in LINES["en"][line]), flagged


# --- any text, in linear time ---------------------------------------------------------------------------------------

# Pieces of every pattern the review runs: tag openings never closed, fact edges, agreement and refusal words, the
# agent's voice, markers, full-width and other-script digits. A message of 100,000+ characters repeats a few of them.
PIECES = [
    "<tool_call>",
    "</tool_call",
    "</tool_call>",
    "#",
    "#W",
    "@",
    ".",
    ",",
    "_",
    "a",
    "A",
    "1",
    "１",
    "٧",
    "R",
    " ",
    "\n",
    "\u3000",
    "no",
    "not ",
    "yes",
    "don't",
    "不",
    "好的",
    "确认",
    "行",
    "I have updated your",
    "let me check ",
    "I'll ",
    " for you",
    "###STOP###",
    "###",
    "known_info",
    "您",
    "我已经",
    "mia_li_",
    "x@y.",
]
LONG = 100_000
LINEAR_S = 5.0  # a linear review of the 400,000 characters below takes about half a second; a quadratic one, hours


@settings(max_examples=15, deadline=None)
@given(unit=st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join))
def test_any_long_message_is_reviewed_in_linear_time(unit: str) -> None:
    import time

    text = unit * (LONG // len(unit) + 1)
    # the user's opening, an agent's confirmation request and a stop, each the long text, and a tool's result too
    dialogue = talk(text, text + " Shall I proceed?", text + " ###STOP###")
    started = time.perf_counter()
    review(RETAIL, dialogue, language="en", tool_texts=[text])
    assert time.perf_counter() - started < LINEAR_S


# --- the model reviewer: a real HTTP endpoint answering the judge's JSON ------------------------------------------


def model_reviewer(server: Any) -> Any:
    from rewardkit.loop.user_review import make_reviewer
    from rewardkit.loop.user_sim.config import UserSimConfig

    return make_reviewer(UserSimConfig(review_url=server.base_url, review_model="m", retries=0, backoff_s=0.0))


CLEAN = talk("Hi, I want to cancel order #W6779827.", "Done, it is cancelled.", "Thanks. ###STOP###")
# (the reviewer's answer, the flags it gives as (kind, turn, evidence))
VERDICTS = [
    ('{"verdict": "accept", "reason": "the user kept to its scenario"}', []),
    (  # the user's fault: one flag at its last message (its second), the reason as evidence
        '{"verdict": "reject", "reason": "it asked for a refund to a card it was never given", "fault": "user"}',
        [("model_review", 2, "it asked for a refund to a card it was never given")],
    ),
    (
        '{"verdict": "reject", "reason": "no reason given for whose fault", "fault": null}',
        [("model_review", 2, "no reason given for whose fault")],
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


LAMP = "I want to return the lamp from my last order."  # 45 characters: long enough to be a loop when sent again
# (the user's messages, the agent's replies between them, the loop flags' turns)
LOOPS = [
    ([LAMP, LAMP], [2]),  # the same message again
    ([LAMP, "Yes, please.", LAMP.upper() + "  "], [3]),  # case and spaces do not make it another message
    ([LAMP, f"{LAMP} ###STOP###"], [2]),  # nor does a marker
    (["Yes, please.", "Yes, please.", "Yes, please."], []),  # a short answer is a customer's, however often
    (["好的，谢谢", "好的，谢谢"], []),
    ([LAMP, "I want to return the lamp from my first order."], []),  # another message
]


@pytest.mark.parametrize(("said", "flagged"), LOOPS)
def test_a_user_that_sends_a_long_message_again_is_looping(said: list[str], flagged: list[int]) -> None:
    lines = [line for text in said for line in (text, "Could you say more?")][:-1]
    done = review(RETAIL, talk(*lines), language="en", kinds=["loop"], reached=lambda: True)
    assert [f.turn for f in done] == flagged
    # before the goal a repeated request answers an agent that ignores it: never a loop
    assert review(RETAIL, talk(*lines), language="en", kinds=["loop"], reached=lambda: False) == ()


def waited(*replies: tuple[str, bool]) -> list[Turn]:
    """A dialogue of user replies, each with whether approval requests were waiting when it was written."""
    out = [Turn("agent", GREETING)]
    for text, waiting in replies:
        out += [Turn("user", text, waiting=waiting), Turn("agent", "Please approve request req-1.")]
    return out


# (the user's replies with whether requests waited, the no_decision flag's turn or None)
DECISIONS = [
    ([("Change the price.", False), ("###APPROVE###", True)], None),  # decided at once
    ([("Change the price.", False), ("What does it change?", True), ("###DECLINE###", True)], None),  # asked, decided
    ([("Change the price.", False), ("Hmm, let me see.", True), ("Thanks. ###STOP###", False)], 2),  # never decided
    ([("Change the price.", False), ("What?", True), ("Why?", True)], 2),  # the first undecided answer is named
    ([("Change the price.", False), ("Thanks. ###STOP###", False)], None),  # nothing waited
    ([("Change the price.", False), ("###APPROVE### ###DECLINE###", True)], 2),  # both markers decide nothing
]


@pytest.mark.parametrize(("replies", "turn"), DECISIONS)
def test_waiting_requests_answered_without_a_decision(replies, turn: int | None) -> None:
    flags = review(RETAIL, waited(*replies), language="en", kinds=["no_decision"])
    assert [f.turn for f in flags] == ([] if turn is None else [turn])


def test_a_reply_cut_at_the_token_cap_is_flagged_where_it_is() -> None:
    dialogue = [Turn("agent", GREETING), Turn("user", "I want to"), Turn("agent", "Yes?")]
    dialogue += [Turn("user", "return the lamp from my last", cut=True), Turn("agent", "Which order?")]
    flags = review(RETAIL, dialogue, language="en", kinds=["cut_reply"])
    assert [(f.kind, f.turn) for f in flags] == [("cut_reply", 2)]  # the second user message, the only cut one


TASK_REASON = {"user_scenario": {"instructions": {"reason_for_call": "You want to exchange the mechanical keyboard."}}}
# (the user's messages, flagged): the reason's content words are "exchange", "mechanical", "keyboard"
REQUESTS = [
    (["I'd like to exchange my keyboard."], False),  # two of them: the request is said
    (["Hi, I have a question.", "It's about the mechanical keyboard, to exchange it."], False),  # said later
    (["Hi, I have a question about something."], True),  # nothing of it, in any message
    (["I'm here to help you with your order."], True),  # "order" and "help" say nothing of what it wants
    (["The keyboard."], True),  # one word of three: not the request
    (["Hi, I want to exchange two keyboards."], False),  # an inflection is the same word
]


@pytest.mark.parametrize(("said", "flagged"), REQUESTS)
def test_a_user_that_never_says_what_it_wants(said: list[str], flagged: bool) -> None:
    lines = [line for text in said for line in (text, "Go on?")][:-1]
    flags = review(TASK_REASON, talk(*lines), language="en", kinds=["no_request"])
    assert [(f.kind, f.turn) for f in flags] == ([("no_request", 1)] if flagged else [])


def test_a_fact_of_the_scenario_says_what_it_wants() -> None:
    task = {"user_scenario": {"instructions": {"reason_for_call": "Cancel order #W6779827."}}}
    assert review(task, talk("It's #W6779827."), language="en", kinds=["no_request"]) == ()


@pytest.mark.parametrize("domain_name", ["retail", "livestream"])
def test_no_clean_scripted_episode_is_flagged(domain_name: str) -> None:
    # Every task the reward scores, played by the gold agent against the honest scripted customer: the review (voice
    # classifier included) flags none of them. A false flag here would take a real outcome out of training.
    domain, reward, tasks = get_domain(domain_name), TaskCompletion(), []
    for task in domain.tasks().values():
        try:
            reward([""], messages=[[]], task=[task], domain=[domain_name])
        except TaskError:
            continue
        tasks.append(task)
    results = run_episodes(domain, tasks, GoldAgent, ScriptedSimulator(), RolloutLimits(user_review="count"))
    flagged = {r.task_id: r.infos.user_flags for r in results if r.infos.user_flags}
    assert len(tasks) >= 40 and flagged == {}


def test_a_chinese_request_is_said_in_its_own_words_not_in_function_characters() -> None:
    # The reason's pairs without a function character: 四件, 件套, 降到, 到2… ; "不同意，这个申请我不批" shares 我不 and
    # 不批 with it, which say nothing of the request; "四件套降到299" says it.
    task = {"user_scenario": {"instructions": {"reason_for_call": "四件套降到299元；要是我不批，就发券。"}}}
    flags = review(task, talk("不同意，这个申请我不批。"), language="zh", kinds=["no_request"])
    assert [f.kind for f in flags] == ["no_request"]
    assert review(task, talk("把四件套降价吧"), language="zh", kinds=["no_request"]) == ()


def test_a_lone_surrogate_is_reviewed_not_raised() -> None:
    # Not text, but a simulator or a task's JSON may carry one: the classifier reads it as "?", nothing raises.
    dialogue = talk("Cancel #W1234567 \udfff ok", "Done.", "\ud800")
    assert all(f.kind in KINDS for f in review(RETAIL, dialogue, language="en"))


def test_a_customer_that_writes_the_agents_line_breaks_its_role() -> None:
    reply = "Sure, cancel it.\nAgent: Done! Anything else?\nCustomer: No, thanks."
    flags = review(RETAIL, talk(reply), language="en", kinds=["role_break"])
    assert [(f.kind, f.evidence) for f in flags] == [("role_break", "writes the agent's line: 'Agent:'")]

"""The voice and agreement classifiers: whose voice a message is in, and whether it agrees, on lines they were not
fitted on, in both languages."""

from __future__ import annotations

from rewardkit.loop.voice import AGREEMENT_LINES, AGREES_AT, LINES, THRESHOLD, Voice, _training_lines

# (a message none of the fitted lines holds, whether it is in the agent's voice)
HELD_OUT = [
    ("I'm so glad you reached out! I'd be delighted to help with your order today.", True),
    ("Our team has issued your refund; it should appear within a week.", True),
    ("As your support specialist, I can walk you through the return process.", True),
    ("I apologize for the trouble. I'm here for anything you need.", True),
    ("您好！很高兴为您服务，有任何问题随时告诉我。", True),
    ("已经为您处理好了，请问还需要什么帮助吗？", True),
    ("I bought a desk lamp and it arrived broken.", False),
    ("Could you switch my order to the black one?", False),
    ("My zip code is 60614 and my name is Lei Wang.", False),
    ("No thanks, that's everything. Bye!", False),
    ("直播间的优惠券能再加十张吗？", False),
    ("我不同意这个改价。", False),
]


def misread(probability, threshold: float, table: list[tuple[str, bool]]) -> tuple[list[str], list[str]]:
    """The table's lines the classifier says yes to wrongly, and those it misses (yes: probability >= threshold)."""
    said = [p >= threshold for p in probability([text for text, _ in table])]
    wrong = [text for (text, truth), yes in zip(table, said, strict=True) if yes and not truth]
    missed = [text for (text, truth), yes in zip(table, said, strict=True) if truth and not yes]
    return wrong, missed


def test_messages_it_was_not_fitted_on_are_read_in_their_voice() -> None:
    # A customer's line read as the agent's takes a good episode out of training: none may be. An agent's line missed
    # leaves a role break in: at most one of the six.
    customers_as_agent, agents_missed = misread(Voice.shared().agent_probability, THRESHOLD, HELD_OUT)
    assert customers_as_agent == [] and len(agents_missed) <= 1, (customers_as_agent, agents_missed)


def test_it_fits_its_own_lines_and_reads_no_marker_or_tool_call() -> None:
    voice = Voice.shared()
    labels, texts = zip(*_training_lines(), strict=True)
    predicted = [p >= THRESHOLD for p in voice.agent_probability(list(texts))]
    wrong = [t for t, label, p in zip(texts, labels, predicted, strict=True) if bool(label) != p]
    assert len(wrong) <= len(texts) // 20, wrong  # at most 5% of its own lines misread
    assert len(LINES) < len(texts)  # the domains' own lines are added: the greeting, the scripted customer's
    # markers and tool-call blocks are taken out before it reads: nothing left is 0, whatever the block says
    only = ["###STOP###", '<tool_call>{"name": "x"}</tool_call> ###APPROVE###', ""]
    assert voice.agent_probability(only) == [0.0, 0.0, 0.0]


# (a reply to "shall I go ahead?" none of the fitted lines holds, whether it agrees): thanks and praise, and Chinese
# agreement words no rule lists (成, 妥, 要得), against questions, facts, new requests and the agent's own words
AGREEMENT_HELD_OUT = [
    ("Wonderful, thanks a lot!", True),
    ("That would be great, thank you.", True),
    ("Lovely, appreciate your help!", True),
    ("OK then, let's do that.", True),
    ("Brilliant.", True),
    ("太棒了，谢谢！", True),
    ("嗯嗯，麻烦了。", True),
    ("成，就这么办吧。", True),
    ("妥了，谢谢你。", True),
    ("要得，改吧。", True),
    ("How much will I get back?", False),
    ("Which card will the refund go to?", False),
    ("My name is Yusuf Rossi.", False),
    ("I'd like to exchange the lamp too.", False),
    ("退款多久到账？", False),
    ("还有一个订单也要取消。", False),
    ("我叫王磊。", False),
    ("这个券能叠加吗？", False),
    ("I'm so glad to help with your order today.", False),
]


def test_replies_it_was_not_fitted_on_are_read_as_agreeing_or_not() -> None:
    # A question or a fact read as agreement flags a stop that was the customer's right: none may be. An agreement
    # missed leaves a premature stop in: at most one of the ten.
    others, agreements_missed = misread(Voice.shared().agreement_probability, AGREES_AT, AGREEMENT_HELD_OUT)
    assert others == [] and len(agreements_missed) <= 1, (others, agreements_missed)
    fitted = {text for _, text in AGREEMENT_LINES}
    assert not fitted & {text for text, _ in AGREEMENT_HELD_OUT}  # held out: none of them was fitted on

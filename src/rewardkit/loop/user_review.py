"""The user review: the simulated user's own mistakes, found by rule in each finished episode.

A simulator that fails (an endpoint down) ends its episode as ``user_sim_error``. One that answers, but answers
wrong, would otherwise have the agent scored for the user's mistake: tau2-bench's analysis of its retail domain
found the user simulator behind up to 30% of failed trajectories. Each rule reads the episode as the user lived it
(the visible dialogue, the task's scenario, the texts the agent and its tools produced) and returns a flag with its
evidence:

- ``premature_stop``: the user ends the conversation right after the agent asked it to confirm an action, or
  announced one, while its stop message agrees to it and the task is not done: the write it confirmed never ran
  (tau2-bench issue #297);
- ``unseen_fact``: an identifier, an e-mail address or a number of three or more digits in the user's messages that
  appears neither in its scenario nor in anything the agent or the tools said;
- ``role_break``: the user writes a tool call, speaks as the agent, names its scenario's fields, or quotes the
  instructions on how to behave;
- ``wrong_approval``: the user approves what its scenario declines, or the reverse;
- ``wrong_language``: a user message in another language than the domain's.

What the rules cannot see: a user who invents a plausible fact without an identifier (a wrong reason, a made-up
preference), one who stops early without agreeing to anything, or a paraphrase of its instructions. A model reviewer
(:class:`ModelReviewer`, ``user_sim.review_url``) reads the episodes the rules passed for those, through the judge
role (:mod:`rewardkit.loop.judge`: the same endpoint client, retries, breaker, reply cache and ledger as every model
role), and flags ``model_review`` with its reason. The rules are cheap enough to run on every rollout; the reviewer
costs one model call per episode they pass.

>>> from rewardkit.loop.user_sim.base import Turn
>>> task = {"user_scenario": {"instructions": {"reason_for_call": "Cancel order #W1234567.", "approval": "approve"}}}
>>> dialogue = [Turn("agent", "Hi! How can I help you today?"), Turn("user", "Cancel #W1234567 and #W7654321.")]
>>> [(f.kind, f.evidence) for f in review(task, dialogue, language="en")]
[('unseen_fact', '#W7654321')]
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewardkit.envs.approvals import user_decision
from rewardkit.envs.tasks import approves, instructions
from rewardkit.loop.judge import PROMPT_VERSION, Judge
from rewardkit.loop.roles import JsonRole
from rewardkit.loop.user_sim.base import CONFIRMATION_REQUEST, STOP, Turn

KINDS = ("premature_stop", "unseen_fact", "role_break", "wrong_approval", "wrong_language")
MODEL_REVIEW = "model_review"  # the kind of a model reviewer's flag

if TYPE_CHECKING:
    from rewardkit.loop.user_sim.config import UserSimConfig


@dataclass(frozen=True)
class UserFlag:
    """One mistake of the simulated user: its kind, the index of the user's message in the dialogue, the evidence."""

    kind: str
    turn: int
    evidence: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "turn": self.turn, "evidence": self.evidence}


# --- what the user may say --------------------------------------------------------------------------------------

# Order ids (#W6779827), item and product ids, user ids (mia_li_3668), e-mail addresses, numbers of 3+ digits.
# The edges are ASCII: in Chinese text an identifier sits right beside the characters around it ("打开R101的"). Each
# pattern starts only where a run of its characters starts and never backtracks into it, so a message of any length
# is read in linear time (a simulated user may answer with a page of garbage).
_EMAIL = re.compile(r"(?<![A-Za-z0-9_.+-])[A-Za-z0-9_.+-]++@[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)+")
_HASH_ID = re.compile(r"#[A-Za-z]*\d{3,}")
_USER_ID = re.compile(r"(?<![A-Za-z0-9_])[a-z]+(?:_[a-z]+)+_\d{3,}(?![A-Za-z0-9_])")
_CODE = re.compile(r"(?<![A-Za-z0-9_])[A-Z]{1,4}\d{3,}(?![A-Za-z0-9_])")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.#])\d{3,}(?:[.,]\d+)?(?![A-Za-z0-9_])")
_DIGIT_RUN = re.compile(r"\d[\d.,]*")
_FACTS = (_EMAIL, _HASH_ID, _USER_ID, _CODE, _NUMBER)  # most specific first
_ANY_FACT = re.compile("|".join(f"(?:{p.pattern})" for p in _FACTS))


def facts(text: str) -> list[str]:
    """The checkable facts of a message: identifiers, e-mail addresses and numbers of three or more digits.

    >>> facts("Order #W6779827 for mia_li_3668 (mia.li@example.com), item 1586641416, $466.75, SKU SP002.")
    ['mia.li@example.com', '#W6779827', 'mia_li_3668', 'SP002', '1586641416', '466.75']
    """
    found: list[str] = []
    rest = text
    for pattern in _FACTS:
        for match in pattern.finditer(rest):
            found.append(match.group(0))
        rest = pattern.sub(" ", rest)  # a fact is counted once, by its most specific pattern
    return found


# A message is checked for at most MAX_FACTS facts, and read no further once MAX_UNSEEN were found unseen: a message
# with more is garbage already, and the check stays linear in the dialogue's length.
MAX_FACTS = 256
MAX_UNSEEN = 8


class _Seen:
    """What the user saw; its numbers as digits alone are read out only when a fact is not in the text itself."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._numbers: str | None = None

    def knows(self, fact: str) -> bool:
        """The fact itself was seen, or its digits are (part of) a number seen: an order id without its ``#``, a
        price with another separator."""
        if fact in self.text:
            return True
        digits = re.sub(r"\D", "", fact)
        if len(digits) < 3:
            return False
        if self._numbers is None:
            self._numbers = "\n".join(re.sub(r"\D", "", run) for run in _DIGIT_RUN.findall(self.text))
        return digits in self._numbers


# --- how an agent asks to act, and how a user agrees ------------------------------------------------------------

_ANNOUNCES = re.compile(
    r"\b(?:I will|I'll|I am going to|I'm going to|let me (?!know))\b"
    r"|正在为您|马上为您|我(?:将|来|这就|现在)(?:为您|帮您)",
    re.IGNORECASE,
)
_CLOSING = re.compile(r"\b(?:anything|something) else\b|还有(?:什么|其他|别的)|其他(?:问题|需要)", re.IGNORECASE)
_AGREES = re.compile(
    r"\b(?:yes|yeah|yep|sure|confirm(?:ed)?|go ahead|please do|do it|proceed|ok(?:ay)?)\b"
    r"|是的|好的|确认|可以|没问题|行|对的",
    re.IGNORECASE,
)

# --- how the agent speaks, which the user must not ----------------------------------------------------------------

_AGENT_VOICE = re.compile(
    r"\bhow (?:can|may) I (?:help|assist) you\b|\bI have (?:cancelled|canceled|processed|updated|modified|refunded)\b"
    r"|\bas (?:an|your) (?:agent|assistant)\b|请问有什么可以帮您|我已(?:为您|帮您)",
    re.IGNORECASE,
)
_INSTRUCTION_WORDS = re.compile(r"\b(?:known_info|unknown_info|reason_for_call|task_instructions|user_scenario)\b")
QUOTE_WORDS = 12  # a run of this many words of the user's behaviour instructions, verbatim, is a quote
QUOTE_CHARS = 12  # the same for Chinese, which has no spaces: this many characters
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
_MARKERS = re.compile(r"###[A-Z-]+###")
_TOOL_CALL = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.DOTALL)


def _user_turns(dialogue: Sequence[Turn]) -> list[tuple[int, str]]:
    return [(i, t.text) for i, t in enumerate(dialogue) if t.role == "user"]


def _scenario_text(task: Mapping[str, Any]) -> str:
    scenario = task.get("user_scenario")
    return json.dumps(scenario, ensure_ascii=False) if scenario is not None else ""


def _behaviour(task: Mapping[str, Any]) -> str | None:
    """How the user is told to behave (``task_instructions``): text it follows, never says. What it wants and what
    it knows (``reason_for_call``, ``known_info``) it is meant to say, often word for word."""
    found = instructions(task)
    text = found.get("task_instructions") if isinstance(found, Mapping) else None
    return text if isinstance(text, str) else None


def premature_stop(dialogue: Sequence[Turn], reached: Callable[[], bool] | None = None) -> list[UserFlag]:
    """The user's last message stops the conversation (``###STOP###``) and agrees to what the agent's message before
    it asked to confirm, or announced, while the task is not done (``reached``, when the episode can tell): the agent
    had no turn left to run it. A closing question ("anything else?") asks nothing to confirm."""
    if len(dialogue) < 2 or dialogue[-1].role != "user" or dialogue[-2].role != "agent":
        return []
    last, before = dialogue[-1].text, dialogue[-2].text
    if STOP not in last or _CLOSING.search(before):
        return []
    said = _MARKERS.sub(" ", last)
    asked = any(p.search(before) for p in CONFIRMATION_REQUEST.values()) or _ANNOUNCES.search(before)
    if asked and _AGREES.search(said) and not (reached is not None and reached()):
        return [UserFlag("premature_stop", len(dialogue) - 1, f"agent: {before[-160:]!r}; user: {last[:160]!r}")]
    return []


def unseen_facts(task: Mapping[str, Any], dialogue: Sequence[Turn], tool_texts: Iterable[str] = ()) -> list[UserFlag]:
    """Every fact of a user message that its scenario, the agent and the tools never gave it (each named once)."""
    seen = _scenario_text(task) + "\n" + "\n".join(tool_texts)
    flags, named = [], set()
    for i, turn in enumerate(dialogue):
        if turn.role == "agent":
            seen += "\n" + turn.text
            continue
        index, unseen = _Seen(seen), 0
        for fact in facts(_MARKERS.sub(" ", turn.text))[:MAX_FACTS]:
            if fact not in named and not index.knows(fact):
                named.add(fact)
                flags.append(UserFlag("unseen_fact", i, fact))
                unseen += 1
                if unseen == MAX_UNSEEN:
                    break
        seen += "\n" + turn.text  # what the user said once, it may repeat
    return flags


def _quotes(text: str, source: str) -> str | None:
    """A verbatim run of ``source`` in ``text``: :data:`QUOTE_WORDS` words, or :data:`QUOTE_CHARS` characters of a
    text without spaces."""
    if _CJK.search(source):
        compact, squeezed = re.sub(r"\s+", "", source), re.sub(r"\s+", "", text)
        runs = (compact[start : start + QUOTE_CHARS] for start in range(len(compact) - QUOTE_CHARS + 1))
    else:
        words = source.split()
        runs = (" ".join(words[start : start + QUOTE_WORDS]) for start in range(len(words) - QUOTE_WORDS + 1))
        squeezed = text
    return next((run for run in runs if run in squeezed), None)


def role_breaks(task: Mapping[str, Any], dialogue: Sequence[Turn]) -> list[UserFlag]:
    """A user message that writes a tool call, speaks as the agent, names its scenario's fields or quotes its
    behaviour instructions."""
    behaviour = _behaviour(task)
    flags = []
    for i, text in _user_turns(dialogue):
        evidence = None
        if "<tool_call>" in text or '"arguments"' in text:
            evidence = "a tool call"
        elif found := _AGENT_VOICE.search(text) or _INSTRUCTION_WORDS.search(text):
            evidence = found.group(0)
        else:
            evidence = _quotes(text, behaviour) if behaviour else None
        if evidence is not None:
            flags.append(UserFlag("role_break", i, evidence))
    return flags


def wrong_approvals(task: Mapping[str, Any], dialogue: Sequence[Turn]) -> list[UserFlag]:
    """A decision (``###APPROVE###`` or ``###DECLINE###``) against the scenario's ``approval`` (absent: decline)."""
    wanted = "approve_request" if approves(task) else "decline_request"
    return [
        UserFlag("wrong_approval", i, f"{decision} where the scenario says {wanted.split('_')[0]}")
        for i, text in _user_turns(dialogue)
        if (decision := user_decision(text)) is not None and decision != wanted
    ]


def wrong_language(dialogue: Sequence[Turn], language: str) -> list[UserFlag]:
    """A user message in the other language: no Chinese character in a ``zh`` domain, or more Chinese characters
    than Latin letters in an ``en`` one (markers, tool calls, identifiers and numbers do not count: a tool call is a
    role break)."""
    flags = []
    for i, text in _user_turns(dialogue):
        words = _ANY_FACT.sub(" ", _MARKERS.sub(" ", _TOOL_CALL.sub(" ", text)))
        cjk, latin = len(_CJK.findall(words)), len(_LATIN.findall(words))
        wrong = (language == "zh" and cjk == 0 and latin >= 3) or (language == "en" and cjk > latin)
        if wrong:
            flags.append(UserFlag("wrong_language", i, words.strip()[:80]))
    return flags


def review(
    task: Mapping[str, Any],
    dialogue: Sequence[Turn],
    *,
    language: str,
    tool_texts: Iterable[str] = (),
    kinds: Iterable[str] = KINDS,
    reached: Callable[[], bool] | None = None,
) -> tuple[UserFlag, ...]:
    """Every flag of the rules in ``kinds``, in dialogue order. ``reached``: whether the task is done (asked only
    when a stop looks premature)."""
    wanted = set(kinds)
    found: list[UserFlag] = []
    if "premature_stop" in wanted:
        found += premature_stop(dialogue, reached)
    if "unseen_fact" in wanted:
        found += unseen_facts(task, dialogue, tool_texts)
    if "role_break" in wanted:
        found += role_breaks(task, dialogue)
    if "wrong_approval" in wanted:
        found += wrong_approvals(task, dialogue)
    if "wrong_language" in wanted:
        found += wrong_language(dialogue, language)
    return tuple(sorted(found, key=lambda f: (f.turn, KINDS.index(f.kind))))


# --- the model reviewer -----------------------------------------------------------------------------------------

REVIEW_INSTRUCTIONS = """\
You review a simulated customer, not the agent. A language model played the customer in a conversation with a
customer-service agent, following the scenario below; the agent's mistakes are not your concern. Reject (fault
"user") if the customer: said something its scenario does not support and no one told it (a fact, a reason, a
preference, an identifier); acted as the agent or quoted its own instructions; approved or declined against its
scenario; ended the conversation before what it asked for was done; or wrote in another language than {language}.
Accept otherwise, even when the agent failed. Your reason quotes the customer's words at fault."""
REVIEW_VERSION = PROMPT_VERSION * 100 + 1  # the judge's answer format, then this prompt's wording
MAX_MESSAGE = 2000  # characters of each message shown to the reviewer: one long reply cannot crowd out the rest


class ModelReviewer:
    """A model's review of the simulated user's part in an episode, through ``judge`` (thread-safe; blocks)."""

    def __init__(self, judge: Judge) -> None:
        self.judge, self.name = judge, judge.name

    def review(
        self, task: Mapping[str, Any], dialogue: Sequence[Turn], *, language: str, tool_texts: Iterable[str] = ()
    ) -> tuple[UserFlag, ...]:
        """One ``model_review`` flag (at the user's last message, its evidence the reviewer's reason) when the
        reviewer rejects the user, else none. A reviewer that cannot answer raises the judge's ``RoleError``."""
        scenario = instructions(task)
        lines = [f"Scenario: {json.dumps(scenario, ensure_ascii=False)}", "", "Conversation:"]
        lines += [f"{t.role}: {t.text[:MAX_MESSAGE]}" for t in dialogue]
        tools = [text[:MAX_MESSAGE] for text in tool_texts]
        lines += ["", "What the tools returned to the agent (it may have told the customer):", *tools] if tools else []
        verdict = self.judge.judge(REVIEW_INSTRUCTIONS.format(language=language), "\n".join(lines))
        if verdict.accept or verdict.fault not in (None, "user"):  # the agent's or a tool's fault: not the user's
            return ()
        last = max((i for i, _ in _user_turns(dialogue)), default=0)
        return (UserFlag(MODEL_REVIEW, last, verdict.reason[:200]),)


def make_reviewer(cfg: UserSimConfig) -> ModelReviewer | None:
    """The model reviewer ``cfg`` names (``user_sim.review_url``), or None: the rules only. It is called as the
    simulator is (the key, timeout, retries, backoff and concurrency of ``cfg``)."""
    if cfg.review_url is None:
        return None
    if cfg.review_model is None:
        raise ValueError("user_sim.review_url needs user_sim.review_model: set the model the endpoint serves")
    role = JsonRole("user_review", cfg.review_url, cfg.review_model, settings=cfg.endpoint(), version=REVIEW_VERSION)
    return ModelReviewer(Judge(role))

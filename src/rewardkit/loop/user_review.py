"""The user review: the simulated user's own mistakes, found by rule in each finished episode.

A simulator that fails (an endpoint down) ends its episode as ``user_sim_error``. One that answers, but answers
wrong, would otherwise have the agent scored for the user's mistake: tau2-bench's analysis of its retail domain
found the user simulator behind up to 30% of failed trajectories. Each rule reads the episode as the user lived it
(the visible dialogue, the task's scenario, the texts the agent and its tools produced) and returns a flag with its
evidence:

- ``premature_stop``: the user ends the conversation right after the agent asked it to confirm an action, or
  announced one, while its stop message agrees to it and the task is not done: the write it confirmed never ran
  (tau2-bench issue #297). A message that negates, refuses or puts off anything ("no", "don't", "wait", "maybe
  later", "不", "别", "改天再说") does not agree, whatever agreeing words it also holds; one that refuses nothing
  agrees in a listed word ("yes", "可以") or in any other words the agreement classifier reads as agreement ("That
  works, thanks!");
- ``unseen_fact``: an identifier, an e-mail address or a number of three or more digits in the user's messages that
  appears neither in its scenario nor in anything the agent or the tools said (compared in NFKC form, its digits
  ASCII: "R１０１" is "R101");
- ``role_break``: the user writes a tool call, names its scenario's fields, quotes the instructions on how to behave
  (its scenario's, or the simulator's reminder of who it is), or speaks as the agent: in the agent's set phrases
  (offers help, or says it did or will do something to what is the customer's: "I have updated your address", never
  "I have updated my address"), or in any other words the voice classifier (:mod:`rewardkit.loop.voice`, MiniLM
  embeddings) reads as the agent's;
- ``wrong_approval``: the user approves what its scenario declines, or the reverse;
- ``wrong_language``: a user message in another language than the domain's.
- ``no_stop``: the task is done, and the user never ended the conversation: the episode ran to its turn limit;
- ``loop``: the task is done, and the user sends again a message it already sent (:data:`LOOP_CHARS` characters or
  more, compared in :func:`canonical` form without markers and with runs of spaces as one): a model stuck in a loop.
  Before the goal, a repeated request may answer an agent that ignores it: the agent's failure, not flagged;
- ``no_decision``: approval requests were waiting for the user, it answered without ``###APPROVE###`` or
  ``###DECLINE###``, and it never decided after: the agent can only ask again;
- ``no_request``: no user message says what the user wants: none holds two of the content words of its scenario's
  ``reason_for_call`` (one, if the reason has only one) or a fact of its scenario. An agent that completes such a task
  acted on nothing the customer said;
- ``cut_reply``: the user's reply stopped at the simulator's token cap even when asked for again with twice the
  tokens (``Turn.cut``): the customer's message is half a message.

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
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewardkit.envs.approvals import user_decision
from rewardkit.envs.tasks import approves, instructions, known_info, reason_for_call
from rewardkit.envs.termination import Termination
from rewardkit.loop.judge import PROMPT_VERSION, Judge
from rewardkit.loop.roles import JsonRole
from rewardkit.loop.user_sim.base import CONFIRMATION_REQUEST, LOOP_CHARS, MARKERS, MISTAKES, STOP, Turn
from rewardkit.loop.user_sim.openai_sim import REMINDER, SPEAKERS
from rewardkit.loop.voice import AGREES_AT, THRESHOLD, Voice, without_tool_calls

KINDS = MISTAKES
MODEL_REVIEW = "model_review"  # the kind of a model reviewer's flag

if TYPE_CHECKING:
    from rewardkit.loop.user_sim.config import UserSimConfig


@dataclass(frozen=True)
class UserFlag:
    """One mistake of the simulated user: its kind, the user's message it is in, the evidence.

    ``turn`` counts the user's messages alone, from 1 (its opening): the dialogue the simulator saw, the episode log's
    ``messages`` and the training trajectory interleave different turns with them (a greeting, a system prompt, tool
    results), but hold the user's messages in the same order. The user's message that ends the conversation
    (``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``) is never shown to the policy: the log keeps it as
    ``closing``, after ``messages``, and numbers it so (:attr:`rewardkit.loop.episode.Turns.closing`)."""

    kind: str
    turn: int
    evidence: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "turn": self.turn, "evidence": self.evidence}


# --- one form of a text -------------------------------------------------------------------------------------------

_OTHER_DIGIT = re.compile(r"(?![0-9])\d")  # a decimal digit of another script: Arabic-Indic, Devanagari, ...


def canonical(text: str) -> str:
    """The text in one form for the rules to read: NFKC (full-width letters, digits and punctuation as ASCII, the
    ideographic space as a space, ligatures spelled out), every decimal digit as its ASCII one, and no invisible
    format character (category Cf: a zero-width space, a soft hyphen, a word joiner, a byte-order mark, a direction
    mark). A fact or a word is the same however its characters were typed: "#W999\u200b9917" is one order id.

    >>> canonical("R１０１\u3000＃Ｗ６７７９８２７, ٧٨٧٠٥, 78\u00ad705")
    'R101 #W6779827, 78705, 78705'
    """
    if text.isascii():
        return text
    text = "".join(c for c in unicodedata.normalize("NFKC", text) if unicodedata.category(c) != "Cf")
    return _OTHER_DIGIT.sub(lambda m: str(unicodedata.decimal(m.group())), text)


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
    """What the user saw (in :func:`canonical` form); its numbers as digits alone are read out only when a fact is
    not in the text itself."""

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


def _starts(chars: str) -> str:
    """A lookahead for the characters a pattern's alternatives start with (letters in either case): the engine then
    skips every other position in C, instead of trying each alternative there (ten times faster on a long
    message)."""
    return f"(?=[{chars}{chars.upper()}])"


# Agreement is read in :func:`canonical` form. English words stand alone (``\b``). Chinese has no spaces, so a word
# counts only where a clause starts (after the start, a space or punctuation, and an optional 嗯/那/就/请/我), and
# 可以, 行, 确认 and 同意 only where the clause ends with them (or a final particle): 银行 and 我可以明天再来 agree to
# nothing.
_CLAUSE_START = r"(?<![^\s,.!?;:~。、…])"
_CLAUSE_END = r"(?:[吧啊呀的了]|(?=[\s,.!?;:~。、…])|$)"
_AGREES = re.compile(
    _starts("ysgcpdonaf嗯那就请我是好没对可行确同")
    + r"(?:\b(?:yes|yeah|yep|sure|confirm(?:ed)?|go ahead|please do|do it|proceed|ok(?:ay)?|no problem|no worries"
    r"|sounds good|al(?:l )?right|perfect|great|fine|absolutely|certainly|of course|correct)\b"
    rf"|{_CLAUSE_START}(?:嗯|那就?|就|请|我)?(?:是的|好的|没问题|对的|(?:可以|行|确认|同意|好){_CLAUSE_END}))",
    re.IGNORECASE,
)
# A negation or a refusal anywhere in the message: it does not agree, whatever agreeing words it also holds ("No, do
# not go ahead", "不行，我不确认", "Yes -- wait, don't"). Putting it off ("maybe later", "let me think about it",
# "改天再说") or keeping things as they are ("keep it", "forget it") refuses as plainly. A missed premature stop costs
# one episode's flag; a refusal read as agreement takes a real outcome out of training. English words are told apart
# from the letters beside them (not from Chinese characters, which Python counts as word characters: "好的no" holds
# "no").
_REFUSES = re.compile(
    _starts("ncswhrdaimltfkpuig不别没未勿甭否算等稍慢且拒改再考想暂回以下免晚放")
    + r"(?:(?<![A-Za-z])(?:no|not|nope|nah|never|neither|nor|cannot|stop|wait|hold on|hang on|refuse[ds]?"
    r"|reject(?:ed)?|declined?|changed? my mind|second thoughts?|cancel that(?!\s*[A-Za-z0-9])"
    r"|later|think (?:about it|it over)|hold off|hold (?:that|it|this)|call (?:you )?back|get back to you"
    r"|forget (?:about )?it|scratch that|nvm|abort|keep (?:it|the)"
    r"|leave it|I['’]ll pass|pass on (?:it|that)|unsure|idk"
    r"|(?:do|does|did|ca|wo|is|are|was|were|should|would|could|must|need|have|has|had|ai)n['’]?t)(?![A-Za-z])"
    r"|n['’]t(?![A-Za-z])"
    r"|[不别没未勿甭否]|算了|等等|等一下|稍等|慢着|且慢|拒绝|改天|再说|考虑|再想|想想|暂缓|回头再|以后再|下次再|免了"
    r"|晚点|放着|放一放)",
    re.IGNORECASE,
)
# Set phrases that hold a negation but refuse nothing: taken out before the refusal is looked for.
_NOT_REFUSING = re.compile(
    _starts("nw没不对别特")
    + r"(?:(?<![A-Za-z])(?:no problem|no worries|not a problem|why not|no longer (?:need|want)(?:ed)?"
    r"|no (?:other|further|more) questions?)(?![A-Za-z])"
    r"|没问题|没错|不错|没关系|不好意思|对不起|不客气|不过|没有(?:其他|别的)|别的|特别)",
    re.IGNORECASE,
)


def agrees(text: str) -> bool:
    """Whether a user's message agrees (markers aside): no negation or refusal anywhere, and an agreeing word or, in
    words no list holds, the agreement classifier (:meth:`Voice.agreement_probability` at least :data:`AGREES_AT`).

    >>> agrees("Yes, go ahead. ###STOP###"), agrees("No, do not go ahead with that. ###STOP###")
    (True, False)
    >>> agrees("可以，谢谢。###STOP###"), agrees("不行，我不确认"), agrees("请退到我的银行卡。")
    (True, False, False)
    >>> agrees("Wonderful, thanks a lot! ###STOP###"), agrees("How much will I get back? ###STOP###")
    (True, False)
    """
    said = MARKERS.sub(" ", canonical(text))
    if _REFUSES.search(_NOT_REFUSING.sub(" ", said)):
        return False
    return _AGREES.search(said) is not None or Voice.shared().agreement_probability([text])[0] >= AGREES_AT


# --- how the agent speaks, which the user must not ----------------------------------------------------------------

# The agent's voice, read in :func:`canonical` form: it offers help, or it did, does or will do something to what is
# the customer's ("your") or for the customer ("for you"). A customer reports what it did itself to what is its own
# ("I have updated my address", "我已经修改了我的地址"): that is never the agent's voice.
_ACTOR = r"\b(?:let me|I(?:['’]ll| will| can| am going to|['’]m going to| have| had|['’]ve))"
_ACTOR += r"(?: (?:already|just|now|also|successfully|gone ahead and|went ahead and))?"
_DONE = (  # what only the agent does to what is the customer's
    r"(?:cancel(?:l?ed)?|process(?:ed)?|updated?|modif(?:y|ied)|refund(?:ed)?|exchanged?|changed?|issued?|reset"
    r"|upgraded?|credit(?:ed)?|rebook(?:ed)?|reinstated?)"
)
_LOOKS = r"(?:check(?:ed)?|look(?:ed)?|pull(?:ed)?|verif(?:y|ied)|review(?:ed)?|handled?|take care|took care)"
_IT = r"(?: (?:that|this|it|them))?"  # "look that up for you", "take care of it for you": a pronoun, never "my ..."
_AGENT_VOICE = re.compile(
    _starts("hwail请有我") + r"(?:\b(?:how|what else) (?:can|may|could) I (?:help|assist|do for) you\b"
    r"|\b(?:is there )?anything (?:else )?I can (?:help you with|do for you|assist you with)\b"
    r"|\bas (?:an|your) (?:agent|assistant)\b"
    rf"|{_ACTOR} {_DONE} your\b"
    rf"|\blet me(?: just)? {_LOOKS}(?: (?:up|into|of))? your\b"
    rf"|{_ACTOR} (?:{_DONE}|{_LOOKS}){_IT}(?: (?:up|into|of))?{_IT} for you\b"
    rf"|{_ACTOR} {_DONE}(?: [\w#-]+){{1,3}} for you\b"  # "cancelled the order #W6779827 for you": done, named
    r"|请问有什么可以帮[您你]|有什么(?:可以|能)[为帮][您你]|我已(?:经)?[为帮替][您你]"
    r"|我已(?:经)?(?:取消|修改|更新|处理|退还|办理)了?[您你]的)",
    re.IGNORECASE,
)
_INSTRUCTION_WORDS = re.compile(r"\b(?:known_info|unknown_info|reason_for_call|task_instructions|user_scenario)\b")
QUOTE_WORDS = 12  # a run of this many words of the user's behaviour instructions, verbatim, is a quote
QUOTE_CHARS = 12  # the same for Chinese, which has no spaces: this many characters
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")


def _user_turns(dialogue: Sequence[Turn]) -> list[tuple[int, str]]:
    """The user's messages, each with its number (:attr:`UserFlag.turn`)."""
    return list(enumerate((t.text for t in dialogue if t.role == "user"), 1))


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
    asking = canonical(before)
    if STOP not in last or _CLOSING.search(asking):  # the episode ends on the marker as typed, so it is read so
        return []
    asked = any(p.search(asking) for p in CONFIRMATION_REQUEST.values()) or _ANNOUNCES.search(asking)
    if asked and agrees(last) and not (reached is not None and reached()):
        number = sum(t.role == "user" for t in dialogue)
        return [UserFlag("premature_stop", number, f"agent: {before[-160:]!r}; user: {last[:160]!r}")]
    return []


def no_stop(
    dialogue: Sequence[Turn], termination: Termination | None, reached: Callable[[], bool] | None = None
) -> list[UserFlag]:
    """The task is done (``reached``) and the user never ended the conversation: the episode ran to its turn limit.
    The agent did its part; a customer that cannot stop (a real model rarely writes the marker unasked) would make
    it a 0. Flagged at the user's last message."""
    if termination is not Termination.MAX_TURNS or reached is None:
        return []
    users = _user_turns(dialogue)
    if not users or not reached():
        return []
    number, last = users[-1]
    return [UserFlag("no_stop", number, f"the task was done and the user went on to the turn limit: {last[:160]!r}")]


def loops(dialogue: Sequence[Turn], reached: Callable[[], bool] | None = None) -> list[UserFlag]:
    """Once the task is done (``reached``), each user message that repeats an earlier one of at least
    :data:`LOOP_CHARS` characters (compared without markers, in :func:`canonical` form, runs of spaces as one, case
    ignored). Before the goal a customer repeating its request may be answering an agent that ignores it (the
    scripted customer does so): that is the agent's failure, not a loop to leave out."""
    if reached is None:
        return []
    said: set[str] = set()
    flags = []
    for i, text in _user_turns(dialogue):
        key = " ".join(MARKERS.sub(" ", canonical(text)).split()).casefold()
        if len(key) >= LOOP_CHARS and key in said:
            flags.append(UserFlag("loop", i, f"the same message again: {text[:120]!r}"))
        said.add(key)
    return flags if flags and reached() else []


def no_decisions(dialogue: Sequence[Turn]) -> list[UserFlag]:
    """The user's first answer to waiting approval requests (``Turn.waiting``) that carries no decision marker, when
    no later message of the user decides either (one pass from the end)."""
    users = [t for t in dialogue if t.role == "user"]
    first, decided_later = None, False
    for number in range(len(users), 0, -1):
        turn = users[number - 1]
        decided_later = decided_later or user_decision(turn.text) is not None
        if turn.waiting and not decided_later:
            first = number
    if first is None:
        return []
    said = users[first - 1].text
    return [UserFlag("no_decision", first, f"approval requests waited; no decision: {said[:120]!r}")]


# Words that say nothing of what a customer wants (any English word under four letters says nothing either).
_FILLER_WORDS = """with your yours that this these those want wants wish would like have from them they will also when
what which about there their then than just some only into been being were order orders help please thanks thank"""
_FILLER = frozenset(_FILLER_WORDS.split())
# Chinese function characters: a character pair holding one says nothing of a request (我不, 不批, 这个, 好的).
_FUNCTION_CHARS = frozenset("我你您他她它们的了是不没在有这那个就也都吧吗呢啊呀哦嗯和与或要想请把给帮让再还很太")
_WORD = re.compile(r"[a-z]{4,}")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]+")


def _stem(word: str) -> str:
    """A word without its English inflection, crudely (keyboards, returned, swapping: keyboard, return, swapp)."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def _content_words(text: str) -> set[str]:
    """English words of four or more letters (not :data:`_FILLER`) and Chinese character pairs without a function
    character, in :func:`canonical` form, lower case."""
    text = canonical(text).casefold()
    words = {_stem(w) for w in _WORD.findall(text) if w not in _FILLER}
    pairs = {run[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1)}
    return words | {pair for pair in pairs if not _FUNCTION_CHARS.intersection(pair)}


def no_request(task: Mapping[str, Any], dialogue: Sequence[Turn]) -> list[UserFlag]:
    """One flag, at the user's first message, when none of its messages says what it wants (module docstring); none
    when the scenario names no reason."""
    reason = reason_for_call(task)
    users = _user_turns(dialogue)
    if not reason or not users:
        return []
    wanted = _content_words(reason)
    said = canonical("\n".join(text for _, text in users))
    if any(fact in said for fact in facts(canonical(_scenario_text(task)))):
        return []
    needed = min(2, len(wanted))
    if needed == 0 or len(wanted & _content_words(said)) >= needed:
        return []
    return [UserFlag("no_request", 1, f"no message says what the scenario wants: {reason[:120]!r}")]


def cut_replies(dialogue: Sequence[Turn]) -> list[UserFlag]:
    """Each user message that stopped at the simulator's token cap (``Turn.cut``)."""
    return [
        UserFlag("cut_reply", number, f"stopped at the token cap: ...{turn.text[-80:]!r}")
        for number, turn in enumerate((t for t in dialogue if t.role == "user"), 1)
        if turn.cut
    ]


def unseen_facts(task: Mapping[str, Any], dialogue: Sequence[Turn], tool_texts: Iterable[str] = ()) -> list[UserFlag]:
    """Every fact of a user message that its scenario, the agent and the tools never gave it (each named once, in
    :func:`canonical` form: both sides are compared in it)."""
    seen = canonical(_scenario_text(task) + "\n" + "\n".join(tool_texts))
    flags, named, number = [], set(), 0
    for turn in dialogue:
        text = canonical(turn.text)
        if turn.role == "agent":
            seen += "\n" + text
            continue
        index, unseen, number = _Seen(seen), 0, number + 1
        for fact in facts(MARKERS.sub(" ", text))[:MAX_FACTS]:
            if fact not in named and not index.knows(fact):
                named.add(fact)
                flags.append(UserFlag("unseen_fact", number, fact))
                unseen += 1
                if unseen == MAX_UNSEEN:
                    break
        seen += "\n" + text  # what the user said once, it may repeat
    return flags


def _quotes(text: str, source: str) -> str | None:
    """A verbatim run of ``source`` in ``text`` (:func:`canonical`, as each run is compared): :data:`QUOTE_WORDS`
    words, or :data:`QUOTE_CHARS` characters of a text without spaces. The run is named as ``source`` writes it."""
    if _CJK.search(source):
        compact, squeezed = re.sub(r"\s+", "", source), re.sub(r"\s+", "", text)
        runs = (compact[start : start + QUOTE_CHARS] for start in range(len(compact) - QUOTE_CHARS + 1))
    else:
        words = source.split()
        runs = (" ".join(words[start : start + QUOTE_WORDS]) for start in range(len(words) - QUOTE_WORDS + 1))
        squeezed = text
    return next((run for run in runs if canonical(run) in squeezed), None)


_REMINDERS = [MARKERS.sub(" ", text) for text in REMINDER.values()]  # the markers are the customer's to write
# A line of the user's that starts with the transcript's label for the agent (``SPEAKERS``), in either language.
_AGENT_LINE = re.compile(
    r"^[ \t]*+(?:" + "|".join(re.escape(names["agent"]) for names in SPEAKERS.values()) + r")[ \t]*+[:：]", re.MULTILINE
)


def role_breaks(task: Mapping[str, Any], dialogue: Sequence[Turn]) -> list[UserFlag]:
    """A user message that writes a tool call, names its scenario's fields, quotes its behaviour instructions or the
    simulator's reminder of who it is, or speaks as the agent: by the agent's set phrases, then by the voice
    classifier (:mod:`rewardkit.loop.voice`) for whatever wording they miss."""
    behaviour = _behaviour(task)
    users = _user_turns(dialogue)
    flags, unread = [], []
    for i, said in users:
        text, evidence = canonical(said), None
        if "<tool_call>" in text or '"arguments"' in text:
            evidence = "a tool call"
        elif found := _AGENT_LINE.search(text):  # the transcript's agent label starting a line: it writes both sides
            evidence = f"writes the agent's line: {found.group(0).strip()!r}"
        elif found := _AGENT_VOICE.search(text) or _INSTRUCTION_WORDS.search(text):
            evidence = found.group(0)
        else:
            sources = [behaviour] if behaviour else []
            evidence = next((q for source in [*sources, *_REMINDERS] if (q := _quotes(text, source))), None)
        if evidence is not None:
            flags.append(UserFlag("role_break", i, evidence))
        else:
            unread.append((i, said))
    # What the user wants and knows, word for word, is the scenario's own words: whatever it sounds like, it is theirs.
    given = {canonical(t) for t in (reason_for_call(task), known_info(task)) if isinstance(t, str)}
    unread = [(i, said) for i, said in unread if canonical(said) not in given]
    if unread:
        for (i, said), p in zip(unread, Voice.shared().agent_probability([s for _, s in unread]), strict=True):
            if p >= THRESHOLD:
                flags.append(UserFlag("role_break", i, f"the agent's voice (p={p:.2f}): {said[:120]!r}"))
    return sorted(flags, key=lambda f: f.turn)


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
    for i, said in _user_turns(dialogue):
        words = _ANY_FACT.sub(" ", MARKERS.sub(" ", without_tool_calls(canonical(said))))
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
    termination: Termination | None = None,
) -> tuple[UserFlag, ...]:
    """Every flag of the rules in ``kinds``, in dialogue order. ``reached``: whether the task is done (asked only
    when a stop looks premature, or the episode ran to its turn limit); ``termination``: how the episode ended."""
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
    if "no_stop" in wanted:
        found += no_stop(dialogue, termination, reached)
    if "loop" in wanted:
        found += loops(dialogue, reached)
    if "no_decision" in wanted:
        found += no_decisions(dialogue)
    if "no_request" in wanted:
        found += no_request(task, dialogue)
    if "cut_reply" in wanted:
        found += cut_replies(dialogue)
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
        last = len(_user_turns(dialogue))  # the user's last message, by its number
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

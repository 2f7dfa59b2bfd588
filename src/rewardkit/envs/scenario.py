"""tau2 scenario text in the customer's own words, shared by the tau2 builder and the scripted user simulator.

tau2-bench writes a task's user scenario in the second person, addressed to a user
simulator ("You are Yusuf Rossi in zip code 19122. You received your order …").
:func:`first_person` moves it into the customer's first person, word for word;
:func:`request_only` drops the sentences that only steer a simulator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
# Forms that map one-to-one whatever their role in the sentence.
_FIXED = {
    "your": "my",
    "yours": "mine",
    "yourself": "myself",
    "you're": "I'm",
    "you'd": "I'd",
    "you'll": "I'll",
    "you've": "I've",
}
# "you" right after these is an object ("asks you to" → "asks me to"); anywhere
# else it is taken as a subject ("the grill you ordered", "if you can")...
_OBJECT_AFTER = frozenset(
    {
        "to",
        "for",
        "with",
        "at",
        "from",
        "about",
        "of",
        "by",
        "on",
        "into",
        "onto",
        "upon",
        "without",
        "against",
        "toward",
        "towards",
        "behind",
        "ask",
        "asks",
        "asked",
        "asking",
        "tell",
        "tells",
        "told",
        "telling",
        "give",
        "gives",
        "gave",
        "help",
        "helps",
        "helped",
        "let",
        "lets",
        "allow",
        "allows",
        "allowed",
        "provide",
        "provides",
        "provided",
        "save",
        "saves",
        "send",
        "sends",
        "show",
        "shows",
        "offer",
        "offers",
        "charge",
        "charges",
        "contact",
        "contacts",
        "remind",
        "reminds",
        "call",
        "calls",
        "thank",
        "thanks",
    }
)
# ... unless a subject's verb follows ("the refund you should expect").
_SUBJECT_BEFORE = frozenset(
    {
        "am",
        "are",
        "was",
        "were",
        "have",
        "has",
        "had",
        "do",
        "did",
        "don't",
        "didn't",
        "can",
        "can't",
        "could",
        "will",
        "would",
        "won't",
        "should",
        "shall",
        "may",
        "might",
        "must",
        "want",
        "wanted",
        "need",
        "needed",
        "wish",
        "think",
        "know",
    }
)
_BE = {"are": "am", "were": "was", "weren't": "wasn't"}  # after a "you" that became "I"


def _cased(new: str, old: str) -> str:
    if new == "I" or new.startswith("I'"):
        return new
    if len(old) > 1 and old.isupper():
        return new.upper()
    return new[0].upper() + new[1:] if old[0].isupper() else new


def first_person(text: str) -> str:
    """Rewrite a tau2 instruction from "you" to "I", changing nothing but pronouns and be-verbs.

    Word-for-word: every other character of ``text`` (ids, names, numbers, spacing)
    is kept, so ``#W2378156`` or ``19122`` can never be altered.
    """
    words = list(_WORD.finditer(text))
    parts: list[str] = []
    last = 0
    became_i = False  # the previous word was rewritten to "I"
    for i, match in enumerate(words):
        word, low = match.group(), match.group().lower()
        gap = text[words[i - 1].end() : match.start()] if i else ""
        new: str | None = None
        if low in _FIXED:
            new = _FIXED[low]
        elif low == "you":
            prev = words[i - 1].group().lower() if i else ""
            after = words[i + 1].group().lower() if i + 1 < len(words) else ""
            if after == "name":  # tau2's frequent typo "You name is …"
                new = "my"
            elif prev in _OBJECT_AFTER and gap.isspace() and after not in _SUBJECT_BEFORE:
                new = "me"
            else:
                new = "I"
        elif low in _BE and became_i and gap.isspace():
            new = _BE[low]
        became_i = new == "I"
        if new is not None:
            parts += [text[last : match.start()], _cased(new, word)]
            last = match.end()
    parts.append(text[last:])
    return "".join(parts)


# Sentences of reason_for_call that direct the simulator rather than state the request:
# secrets ("… (do not share this with the agent)"), reactions to the agent's later turns
# ("If the agent asks for confirmation, …") and conversational tactics ("Make sure you mention …").
_SIMULATOR_ONLY = re.compile(
    r"\b(?:do not|don't|never)\s+(?:share|reveal|mention)\b"
    r"|^\W*(?:but\s+|and\s+)?(?:if|when|once|in case)\b.*\bagent\b"
    r"|\b(?:if|when|once)\s+(?:the\s+)?agent\b"
    r"|^\W*(?:make sure you|provide all details|be insistent|as you are interacting)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?)])\s+")


def request_only(text: str) -> str:
    """``text`` without the sentences meant for a user simulator only (see ``_SIMULATOR_ONLY``)."""
    return " ".join(s for s in _SENTENCE_END.split(text) if s and not _SIMULATOR_ONLY.search(s))


def opening_turn(instructions: Mapping[str, Any] | str | None) -> str:
    """The customer's first message: who they are (to authenticate), then what they want.

    ``instructions`` is a task's ``user_scenario.instructions`` (:func:`rewardkit.envs.tasks.instructions`):
    tau2's mapping, or free text, which is all request.
    """
    if not isinstance(instructions, Mapping):
        instructions = {"reason_for_call": instructions}
    pieces = [instructions.get("known_info"), instructions.get("reason_for_call")]
    # Some scenarios start with a stray "." (". You just lost your tablet").
    texts = [request_only(re.sub(r"^[\s.]+", "", p).rstrip()) for p in pieces if isinstance(p, str)]
    return " ".join(first_person(t) for t in texts if t)

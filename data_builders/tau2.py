"""tau2-grpo: tau2-bench tasks → ms-swift GRPO rows for tool-use rollouts.

Output row (one per task of the split, in split order)::

    {"messages": [{"role": "system", "content": "<the domain's policy.md>"},
                  {"role": "user", "content": "I am Yusuf Rossi in zip code 19122. I received my order #W2378156 …"}],
     "tools": "[{\\"type\\": \\"function\\", …}]",   # JSON string of the domain's OpenAI specs
     "task": "{\\"id\\": \\"0\\", …}",                # the tau2 task, JSON string
     "domain": "retail"}

``tools`` and ``task`` are strings because HF datasets (Arrow) would otherwise
merge the nested schemas of all rows, padding every dict with the union of keys.

The user turn is the scenario's ``known_info`` then ``reason_for_call``, moved
from tau2's second person ("You are …", addressed to a user simulator) into the
customer's first person. Sentences that only steer a simulator (secrets not to
share, "if the agent asks …" reactions, conversational tactics) are dropped, as
are ``unknown_info`` and ``task_instructions``: a single opening turn cannot act
them out, and showing them to the policy would leak what the customer withholds.

Rejected: ``missing_task`` (split names an id the tasks file lacks),
``no_evaluation_criteria``, ``no_reason_for_call``, and the malformed tasks listed in
``tau2_tasks`` (``bad_task``, ``duplicate_task_id``, ``bad_evaluation_criteria``,
``bad_user_scenario``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rewardkit.data_builders._io import BuildReport, Record
from rewardkit.data_builders.tau2_tasks import instructions, load_sources, task_problem

# --- second person → first person ------------------------------------------------

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
_OBJECT_AFTER = frozenset({
    "to", "for", "with", "at", "from", "about", "of", "by", "on", "into", "onto", "upon", "without", "against",
    "toward", "towards", "behind", "ask", "asks", "asked", "asking", "tell", "tells", "told", "telling", "give",
    "gives", "gave", "help", "helps", "helped", "let", "lets", "allow", "allows", "allowed", "provide", "provides",
    "provided", "save", "saves", "send", "sends", "show", "shows", "offer", "offers", "charge", "charges", "contact",
    "contacts", "remind", "reminds", "call", "calls", "thank", "thanks",
})  # fmt: skip
# ... unless a subject's verb follows ("the refund you should expect").
_SUBJECT_BEFORE = frozenset({
    "am", "are", "was", "were", "have", "has", "had", "do", "did", "don't", "didn't", "can", "can't", "could",
    "will", "would", "won't", "should", "shall", "may", "might", "must", "want", "wanted", "need", "needed", "wish",
    "think", "know",
})  # fmt: skip
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


def opening_turn(instructions: Mapping[str, Any]) -> str:
    """The customer's first message: who they are (to authenticate), then what they want."""
    pieces = [instructions.get("known_info"), instructions.get("reason_for_call")]
    # Some scenarios start with a stray "." (". You just lost your tablet").
    texts = [request_only(re.sub(r"^[\s.]+", "", p).rstrip()) for p in pieces if isinstance(p, str)]
    return " ".join(first_person(t) for t in texts if t)


# --- building ---------------------------------------------------------------------

# The user turn of a --multi-turn row. The tau2_user scheduler replaces it with the user
# simulator's opening at rollout time; without the scheduler the row says so to the reader.
MULTI_TURN_PLACEHOLDER = "[the user simulator writes this turn at rollout time: --multi_turn_scheduler tau2_user]"


@dataclass(frozen=True)
class Tau2Options:
    domain: str = "retail"
    split: str = "train"
    tasks_file: Path | None = None  # default: the domain's vendored tasks.json
    split_file: Path | None = None  # default: its split_tasks.json
    policy_file: Path | None = None  # default: its policy.md
    multi_turn: bool = False  # rows for the tau2_user scheduler (see MULTI_TURN_PLACEHOLDER)


def build_tau2_grpo(opts: Tau2Options) -> tuple[list[dict[str, Any]], BuildReport]:
    src = load_sources(opts)
    tools_json = json.dumps(src.tools, ensure_ascii=False)
    report = BuildReport()
    # Tasks-file items no split can name are counted too: nothing in an input goes unaccounted for.
    for source, item, reason, detail in src.unusable:
        report.read += 1
        report.reject(source, reason, detail, raw=item)
    rows: list[dict[str, Any]] = []
    for task_id in src.ids:
        report.read += 1
        source = f"{opts.domain}/{opts.split}/task {task_id}"
        task = src.by_id.get(task_id)
        if task is None:
            report.reject(source, "missing_task", "the split names it but the tasks file has no such id")
            continue
        problem = task_problem(task, src.tool_names)
        opening = ""
        if problem is None:
            opening = MULTI_TURN_PLACEHOLDER if opts.multi_turn else opening_turn(instructions(task))
        if problem is None and not opening:
            problem = ("no_reason_for_call", "nothing is left of the request once the sentences meant only for a "
                       "user simulator are dropped")  # fmt: skip
        if problem:
            report.reject(Record(source, task), *problem)
            continue
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": src.policy},
                    {"role": "user", "content": opening},
                ],
                "tools": tools_json,
                "task": json.dumps(task, ensure_ascii=False),
                "domain": opts.domain,
            }
        )
        report.written += 1
    report.check()
    return rows, report

"""A model-free customer for CI and debugging: a few keyword rules over the agent's last message.

It cannot negotiate, but it drives the common retail path (state the request, identify
yourself when asked, confirm, leave when done) deterministically and without a GPU, so a
multi-turn rollout can be tested end to end. Like tau2's user it reveals only ``known_info``;
``unknown_info`` and ``task_instructions`` are never read. It answers an approval request (a soft-gated
write waiting in ``Progress.requests``) as the task's ``approval`` says, marker included. It speaks the
domain's language: :data:`PHRASES` holds English and Chinese.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rewardkit.envs.approvals import APPROVE, DECLINE
from rewardkit.envs.scenario import first_person, request_only
from rewardkit.envs.tasks import approves, instructions, known_info, reason_for_call
from rewardkit.loop.user_sim.base import CONFIRMATION_REQUEST, STOP, TRANSFER, Progress, Turn

VERSION = 2  # bump when a rule changes: cached scripted replies must not survive it


@dataclass(frozen=True)
class Phrases:
    """One language's rules and lines: what the agent asks (identity, a go-ahead), and the customer's replies."""

    asks_identity: re.Pattern[str]
    asks_confirmation: re.Pattern[str]
    transfers: re.Pattern[str]  # a sentence announcing a hand-off to a person
    sentence: re.Pattern[str]
    thanks: str
    transferred: str
    go_ahead: str
    no_details: str
    as_i_said: str  # "{reason}" is the request
    approve: str  # a waiting request approved (carries the marker: the user's action)
    decline: str


PHRASES = {
    "en": Phrases(
        asks_identity=re.compile(
            r"\b(?:e-?mail|name|username|user\s*id|zip(?:\s*code)?|postal|identif\w*|verif\w*|authenticat\w*)\b"
            r"|\blocate your account\b",
            re.IGNORECASE,
        ),
        asks_confirmation=CONFIRMATION_REQUEST["en"],
        transfers=re.compile(
            r"\btransferr?(?:ed|ing)?\b.*\b(?:human|live|representative|specialist|supervisor|agent)\b", re.IGNORECASE
        ),
        sentence=re.compile(r"[^.!?]+[.!?]*"),
        thanks=f"Thank you, that's everything I needed. {STOP}",
        transferred=f"Okay, I'll hold for the next agent. {TRANSFER}",
        go_ahead="Yes, please go ahead.",
        no_details="Sorry, I don't have any account details to share.",
        as_i_said="As I said: {reason}",
        approve=f"Yes, I approve that request. {APPROVE}",
        decline=f"No, I do not approve that. {DECLINE}",
    ),
    "zh": Phrases(
        # A question about specifics: which, how much, what.
        asks_identity=re.compile(r"请问|哪[个一款场些位]|多少|什么|具体|几[个场号点]"),
        asks_confirmation=CONFIRMATION_REQUEST["zh"],
        transfers=re.compile(r"转[接给交].*(?:人工|客服|专员|同事)"),
        sentence=re.compile(r"[^。！？!?]+[。！？!?]*"),
        thanks=f"好的，谢谢，就这些了。{STOP}",
        transferred=f"好的，我等人工同事。{TRANSFER}",
        go_ahead="可以，请执行。",
        no_details="具体信息我这边没有了。",
        as_i_said="我刚才说了：{reason}",
        approve=f"同意，这个申请我批准了。{APPROVE}",
        decline=f"不同意，这个申请我不批。{DECLINE}",
    ),
}


def _customer_text(text: object) -> str:
    """tau2's second-person ``text`` in the customer's words, simulator-only sentences dropped."""
    if not isinstance(text, str):
        return ""
    # Some scenarios start with a stray "." (". You just lost your tablet"), as opening_turn handles.
    return first_person(request_only(re.sub(r"^[\s.]+", "", text).rstrip()))


def _transferred(text: str, phrases: Phrases) -> bool:
    sentences = phrases.sentence.findall(text)
    return any(phrases.transfers.search(s) and not s.rstrip().endswith(("?", "？")) for s in sentences)


class ScriptedSimulator:
    """Deterministic: the same task, dialogue and progress always give the same reply."""

    name = "scripted"

    def fingerprint(self) -> str:
        return hashlib.sha256(f"scripted:v{VERSION}".encode()).hexdigest()

    def reply(self, task: Mapping[str, Any], dialogue: Sequence[Turn], progress: Progress) -> str:
        if not dialogue or dialogue[-1].role != "agent":
            raise ValueError("the dialogue must start with the agent's greeting and end with an agent turn")
        if instructions(task) is None:
            raise ValueError(f"task {task.get('id')!r} has no user_scenario.instructions")
        reason = _customer_text(reason_for_call(task))
        if not reason:
            raise ValueError(f"task {task.get('id')!r} has no reason for the call to state")
        if not any(turn.role == "user" for turn in dialogue):
            return reason  # the opening: the request only; identity waits until the agent asks
        phrases = PHRASES.get(progress.language)
        if phrases is None:
            raise ValueError(f"the scripted user speaks {', '.join(PHRASES)}, not {progress.language!r}")
        if progress.requests:  # an approval card is waiting: the scenario says how this user answers
            return phrases.approve if approves(task) else phrases.decline
        # Done as TaskCompletion judges it (Goal.reached: on a transfer task, only once transferred); the cheap test
        # first, since state_done may hash the database.
        if progress.outputs_said and progress.state_done:
            return phrases.thanks
        said = dialogue[-1].text
        if _transferred(said, phrases):
            return phrases.transferred
        if phrases.asks_identity.search(said):
            return _customer_text(known_info(task)) or phrases.no_details
        if phrases.asks_confirmation.search(said):
            return phrases.go_ahead
        return phrases.as_i_said.format(reason=reason)

"""A model-free customer for CI and debugging: a few keyword rules over the agent's last message.

It cannot negotiate, but it drives the common retail path (state the request, identify
yourself when asked, confirm, leave when done) deterministically and without a GPU, so a
multi-turn rollout can be tested end to end. Like tau2's user it reveals only ``known_info``;
``unknown_info`` and ``task_instructions`` are never read.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from rewardkit.envs.scenario import first_person, request_only
from rewardkit.envs.tasks import instructions, known_info, reason_for_call
from rewardkit.loop.user_sim.base import STOP, TRANSFER, Progress, Turn

VERSION = 1  # bump when a rule changes: cached scripted replies must not survive it

# The agent wants to know who the customer is.
_ASKS_IDENTITY = re.compile(
    r"\b(?:e-?mail|name|username|user\s*id|zip(?:\s*code)?|postal|identif\w*|verif\w*|authenticat\w*)\b"
    r"|\blocate your account\b",
    re.IGNORECASE,
)
# The agent asks for a go-ahead.
_ASKS_CONFIRMATION = re.compile(
    r"\b(?:confirm\w*|proceed|shall i|should i|would you like me to|do you want me to|go ahead)\b|\byes\s*/\s*no\b",
    re.IGNORECASE,
)
# A sentence announcing a hand-off to a person (a question offering one is not a transfer yet).
_TRANSFERS = re.compile(
    r"\btransferr?(?:ed|ing)?\b.*\b(?:human|live|representative|specialist|supervisor|agent)\b", re.IGNORECASE
)
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")

THANKS = f"Thank you, that's everything I needed. {STOP}"
TRANSFERRED = f"Okay, I'll hold for the next agent. {TRANSFER}"
GO_AHEAD = "Yes, please go ahead."
NO_DETAILS = "Sorry, I don't have any account details to share."


def _customer_text(text: object) -> str:
    """tau2's second-person ``text`` in the customer's words, simulator-only sentences dropped."""
    if not isinstance(text, str):
        return ""
    # Some scenarios start with a stray "." (". You just lost your tablet"), as opening_turn handles.
    return first_person(request_only(re.sub(r"^[\s.]+", "", text).rstrip()))


def _transferred(text: str) -> bool:
    return any(_TRANSFERS.search(s) and not s.rstrip().endswith("?") for s in _SENTENCE.findall(text))


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
        if progress.state_done and progress.outputs_said:
            return THANKS
        said = dialogue[-1].text
        if _transferred(said):
            return TRANSFERRED
        if _ASKS_IDENTITY.search(said):
            return _customer_text(known_info(task)) or NO_DETAILS
        if _ASKS_CONFIRMATION.search(said):
            return GO_AHEAD
        return f"As I said: {reason}"

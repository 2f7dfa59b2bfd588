"""A judge: a reasoning model's verdict on something the rules already passed (a task blueprint, a trajectory).

The judge answers one JSON object, ``{"verdict": "accept" | "reject", "reason": "...", "fault": ...}``: ``fault``
names whose fault a rejection is, ``"agent"``, ``"user"`` or ``"tool"`` (NeMo Gym's three), and may be left out or
null on an accept. Anything else is refused and asked for again (:class:`~rewardkit.loop.roles.JsonRole`); a judge
that never answers so is a :class:`~rewardkit.loop.roles.RoleError`, which callers count as ``judge_error``, never as
a verdict.

>>> verdict_problem({"verdict": "reject", "reason": "the refund went to the wrong card", "fault": "agent"})
>>> verdict_problem({"verdict": "maybe", "reason": "?"})
"verdict: must be 'accept' or 'reject', got 'maybe'"
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rewardkit.loop.roles import JsonRole

FAULTS = ("agent", "user", "tool")
VERDICTS = ("accept", "reject")
PROMPT_VERSION = 1
ANSWER = (
    'Answer with one JSON object and nothing else: {"verdict": "accept" or "reject", "reason": "one sentence", '
    '"fault": "agent", "user" or "tool" (whose fault a rejection is; null on an accept)}.'
)


@dataclass(frozen=True)
class Verdict:
    accept: bool
    reason: str
    fault: str | None  # one of FAULTS on a rejection (None: the judge did not say)

    def as_dict(self) -> dict[str, Any]:
        return {"verdict": "accept" if self.accept else "reject", "reason": self.reason, "fault": self.fault}


def verdict_problem(value: Any) -> str | None:
    """What is wrong with a judge's answer, or None."""
    if not isinstance(value, Mapping):
        return f"the answer must be a JSON object, got {type(value).__name__}"
    if value.get("verdict") not in VERDICTS:
        return f"verdict: must be 'accept' or 'reject', got {value.get('verdict')!r}"
    if not isinstance(value.get("reason"), str) or not value["reason"].strip():
        return "reason: must be a non-empty string saying why"
    if value.get("fault") is not None and value["fault"] not in FAULTS:
        return f"fault: must be one of {', '.join(FAULTS)} or null, got {value['fault']!r}"
    return None


class Judge:
    """A judge behind ``role`` (a :class:`JsonRole`); ``judge`` is thread-safe and blocks."""

    def __init__(self, role: JsonRole) -> None:
        self.role = role
        self.name = role.name
        self.ledger = role.ledger

    def judge(self, instructions: str, subject: str) -> Verdict:
        """The verdict on ``subject`` (what to judge, as text) by ``instructions`` (the criteria)."""
        messages = [
            {"role": "system", "content": f"{instructions.strip()}\n\n{ANSWER}"},
            {"role": "user", "content": textwrap.dedent(subject).strip()},
        ]
        found = self.role.ask(messages, verdict_problem)
        return Verdict(found["verdict"] == "accept", found["reason"].strip(), found.get("fault"))

"""AnswerFormat: the strict layout of answer-only (no-think) completions."""

from __future__ import annotations

import re

from rewardkit.rewards._base import FORMAT_GAPS, PlanningReward, reward
from rewardkit.rewards.strict_format import _SUFFIX, _body_ends

ANSWER_ONLY_PATTERN = re.compile(r"^<answer>\n.*?\n</answer>$", re.DOTALL)
_PREFIX = "<answer>\n"


def matches_answer_only(text: str) -> bool:
    """``ANSWER_ONLY_PATTERN.match(text) is not None``, in linear time."""
    if not text.startswith(_PREFIX):
        return False
    return any(b >= len(_PREFIX) and text.startswith(_SUFFIX, b) for b in _body_ends(text))


def answer_format(completions: list[str]) -> list[float]:
    r"""1.0 iff the completion is exactly one answer block and nothing else, else 0.0.

    Formula: ``1[re.match(r"^<answer>\n.*?\n</answer>$", c, DOTALL)]``: the
    StrictFormat of the planner's think-vs-no-think control run, where the
    model must not think. Pair it with JsonValid and the content rewards.
    Columns: none. Range: {0.0, 1.0}. Never returns None.

    Example::

        >>> from rewardkit.rewards import AnswerFormat
        >>> answer = '<answer>\n{"补全后的问题": "查看经营周报", "plan": []}\n</answer>'
        >>> AnswerFormat()([answer, "<think>\n查看周报\n</think>\n\n" + answer])  # a think is not allowed
        [1.0, 0.0]
    """
    return [1.0 if matches_answer_only(c) else 0.0 for c in completions]


AnswerFormat = reward(
    answer_format,
    sets={"planner_no_think": 0.1},
    gameable=FORMAT_GAPS,
    order=10,
    base=PlanningReward,
)

"""StrictFormat: does the completion follow the planner's exact ``<think>``/``<answer>`` layout?"""

from __future__ import annotations

import re

from rewardkit.rewards._base import FORMAT_GAPS, PlanningReward, reward

# The planner's layout as one regex: the definition the linear check reproduces (see the equivalence tests).
REFERENCE_PATTERN = re.compile(r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$", re.DOTALL)

_PREFIX = "<think>\n"
_MIDDLE = "\n</think>\n\n<answer>\n"
_SUFFIX = "\n</answer>"


def _body_ends(text: str) -> list[int]:
    """Where ``\n</answer>`` must start for ``\n</answer>$`` to match.

    ``$`` without MULTILINE matches at the very end or before one final ``\n``.
    """
    ends = [len(text)] + ([len(text) - 1] if text.endswith("\n") else [])
    return [end - len(_SUFFIX) for end in ends]


def matches_strict_format(text: str) -> bool:
    """``REFERENCE_PATTERN.match(text) is not None``, decided in linear time.

    Both ``.*?`` groups match anything, so the regex matches iff the text starts
    with ``<think>\\n``, ends with ``\\n</answer>`` (``$`` also allows one final
    ``\\n``), and the separator ``\\n</think>\\n\\n<answer>\\n`` fits entirely
    between the two. The regex itself tries every split, which is quadratic on
    texts with thousands of separators.
    """
    if not text.startswith(_PREFIX):
        return False
    for body_end in _body_ends(text):
        if (
            body_end >= len(_PREFIX)
            and text.startswith(_SUFFIX, body_end)
            and text.find(_MIDDLE, len(_PREFIX), body_end) >= 0
        ):
            return True
    return False


def strict_format(completions: list[str]) -> list[float]:
    r"""1.0 iff the completion matches the planner's strict think-then-answer layout, else 0.0.

    Formula: ``1[re.match(r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$", c, DOTALL)]``,
    evaluated in linear time by :func:`matches_strict_format`.
    Columns: none (the planning columns may be passed and are ignored). Range: {0.0, 1.0}. Never returns None.

    Example::

        >>> from rewardkit.rewards import StrictFormat
        >>> gold = '{"补全后的问题": "查看经营周报", "plan": [{"专家": "数据分析专家", "处理问题": ["查看经营周报"]}]}'
        >>> good = f"<think>\n周报属于数据分析专家。\n</think>\n\n<answer>\n{gold}\n</answer>"
        >>> one_newline = good.replace("\n\n", "\n")  # one newline between the blocks instead of two
        >>> StrictFormat()([good, one_newline], solution=[gold, gold], experts=[["数据分析专家"]] * 2)
        [1.0, 0.0]
    """
    return [1.0 if matches_strict_format(c) else 0.0 for c in completions]


StrictFormat = reward(
    strict_format,
    sets={"planner": 0.1},
    gameable=FORMAT_GAPS,
    order=10,
    base=PlanningReward,
)

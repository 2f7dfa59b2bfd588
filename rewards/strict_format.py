"""StrictFormat: does the completion follow the seed's exact layout?"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from rewardkit.rewards._base import PlanningReward

# The seed document's pattern, kept for reference and for the equivalence test.
SEED_PATTERN = re.compile(r"^<think>\n.*?\n</think>\n\n<answer>\n.*?\n</answer>$", re.DOTALL)

_PREFIX = "<think>\n"
_MIDDLE = "\n</think>\n\n<answer>\n"
_SUFFIX = "\n</answer>"


def _body_ends(text: str) -> list[int]:
    """Where ``\n</answer>`` must start for ``\n</answer>$`` to match.

    ``$`` without MULTILINE matches at the very end or before one final ``\n``.
    """
    ends = [len(text)] + ([len(text) - 1] if text.endswith("\n") else [])
    return [end - len(_SUFFIX) for end in ends]


def matches_seed_format(text: str) -> bool:
    """``SEED_PATTERN.match(text) is not None``, decided in linear time.

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


class StrictFormat(PlanningReward):
    """1.0 iff the completion matches the seed's strict layout, else 0.0.

    Formula: ``1[re.match(r"^<think>\\n.*?\\n</think>\\n\\n<answer>\\n.*?\\n</answer>$", c, DOTALL)]``,
    evaluated in linear time by :func:`matches_seed_format`.
    Columns: none. Range: {0.0, 1.0}. Never returns None.
    """

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [1.0 if matches_seed_format(c) else 0.0 for c in completions]

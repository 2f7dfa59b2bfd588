"""How a trainer adds up one completion's rewards: ms-swift's weighted ``nansum``.

ms-swift turns a reward's None into NaN, multiplies each reward's scores by its weight and sums with
``torch.nansum``: a None or NaN score adds 0 to the completion's total. Infinite scores count 0 here too: the
kit's ``values`` check rejects them, and a sum with one in it says nothing about the others. ``rewardkit score``
(:mod:`rewardkit.runs.stats.scoring`) and ``rewardkit lint RECIPE`` (:mod:`rewardkit.lint.samples`) both add with
:func:`weighted_total`, so their totals are the same for the same scores.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any


def counted(score: Any) -> float:
    """What one score adds to a total before its weight: the score, or 0 for None, NaN and an infinity."""
    if score is None:
        return 0.0
    value = float(score)
    return value if math.isfinite(value) else 0.0


def weighted_total(weights: Iterable[float], scores: Iterable[Any]) -> float:
    """The sum of weight x score over one completion's rewards, each score :func:`counted`."""
    return sum(w * counted(s) for w, s in zip(weights, scores, strict=True))

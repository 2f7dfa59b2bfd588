"""Score JSONL rows of (completion, columns) with the registered planning rewards."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rewardkit.files.jsonl import JsonlError, read_jsonl
from rewardkit.testing.calling import score
from rewardkit.testing.totals import weighted_total

if TYPE_CHECKING:
    from rewardkit.rewards.config import RewardConfig

__all__ = ["JsonlError", "ScoreTable", "read_jsonl", "score_rows"]


@dataclass(frozen=True)
class ScoreTable:
    names: list[str]  # one per row
    keys: list[str]  # reward registry keys
    scores: list[list[float | None]]  # [row][reward]
    weights: list[float]

    def total(self, row: int) -> float:
        """The row's weighted sum as ms-swift adds it (a None or NaN score counts 0: its nansum)."""
        return weighted_total(self.weights, self.scores[row])

    def mean_total(self) -> float:
        """The weighted total averaged over rows (NaN with no rows)."""
        return _mean([self.total(i) for i in range(len(self.names))])

    def means(self) -> list[float]:
        cols = zip(*self.scores, strict=True)
        return [_mean([s for s in col if s is not None]) for col in cols]


# Row keys that are not dataset columns: the text scored, the row's label, and the call's own parameter names.
_NOT_COLUMNS = {"completion", "name", "completions", "self"}


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def score_rows(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    config: RewardConfig | Mapping[str, Any] | None = None,
) -> ScoreTable:
    """Score every row's ``completion`` with the rewards ``keys`` (default: all seven), under ``config`` (a loaded
    config, or overrides of ``$REWARDKIT_CONFIG``).

    All rows go through each reward as one batch, as in a GRPO step, called by :func:`rewardkit.testing.score`.
    """
    from rewardkit.rewards import PLANNER_WEIGHTS, REWARDS

    keys = list(keys or PLANNER_WEIGHTS)
    weights = dict(weights or PLANNER_WEIGHTS)
    unknown = [k for k in keys if k not in REWARDS]
    if unknown:
        raise ValueError(f"unknown reward keys {unknown}; run `rewardkit rewards` for the list")
    # The kit's call, as a trainer makes it. Columns named like a reward's own parameters would collide with
    # them in that call, and the completion is scored as text.
    batch = [
        {**{k: v for k, v in r.items() if k not in _NOT_COLUMNS}, "completion": str(r["completion"])} for r in rows
    ]
    per_reward = [score(REWARDS[k](config=config), batch) for k in keys]
    scores = [list(col) for col in zip(*per_reward, strict=True)] if rows else []
    names = [str(r.get("name", i)) for i, r in enumerate(rows)]
    return ScoreTable(names, keys, scores, [weights.get(k, 0.0) for k in keys])

"""JsonValid: is the answer a JSON object that satisfies the plan schema?"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rewardkit.rewards._base import PlanningReward
from rewardkit.rewards._parsing import read_plan


class JsonValid(PlanningReward):
    """1.0 iff the single answer block holds a JSON object valid under the schema.

    Formula: ``1[exactly one <answer>…</answer> after the think block, its text
    decodes to a JSON object, the object validates against the configured JSON
    Schema (``schema``: zh | en | path), and every step's depends_on points at
    earlier steps only]``. A plan that appears only inside ``<think>`` does not
    count; two or more answer blocks are invalid.
    Columns: none. Range: {0.0, 1.0}. Never returns None.
    """

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        return [0.0 if read_plan(c, self.schema) is None else 1.0 for c in completions]

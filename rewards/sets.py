"""The reward sets that rewardkit's GRPO recipes train with: which rewards, in which order, with which weights.

This is the one place the weights are written down. ``PLANNER_WEIGHTS`` (:mod:`rewardkit.rewards`) is derived from
:data:`PLANNER`, and every ``rlhf`` recipe under ``recipes/`` names one set in ``rewardkit.recipes.CATALOG``; its
``reward_funcs:`` and ``reward_weights:`` lines are generated from that set by ``rewardkit.recipes.compose``
(``python -m rewardkit.recipes.compose --write``) and a test fails when a recipe drifts from its set.

This module imports neither ms-swift nor any reward class: it holds registry keys and numbers only.

>>> PLANNER.keys
('strict_format', 'json_valid', 'think_length', 'think_quality', 'rewrite_similarity', 'expert_match', 'plan_coverage')
>>> PLANNER.yaml_weights()  # strings, because ms-swift 4.4 hands YAML list items to its subprocess verbatim
['0.1', '0.1', '0.1', '0.1', '0.2', '0.3', '0.1']
>>> dict(PLANNER_NO_THINK.weights)
{'answer_format': 0.1, 'json_valid': 0.1, 'rewrite_similarity': 0.2, 'expert_match': 0.3, 'plan_coverage': 0.1}
>>> AGENT_MULTI_TURN.yaml_weights()
['1', '0', '0']
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, eq=False)
class RewardSet:
    """A named, ordered set of ``orms`` registry keys and their weights (ms-swift's ``reward_weights``).

    A weight of 0 keeps a reward as a logged metric (``rewards/<Class>/mean``) that does not enter the advantage.
    """

    name: str
    weights: Mapping[str, float]  # registry key -> weight, in the order ms-swift receives them
    description: str

    def __post_init__(self) -> None:
        weights = {str(key): float(weight) for key, weight in self.weights.items()}
        if not weights:
            raise ValueError(f"reward set {self.name!r} is empty")
        if any(weight < 0 for weight in weights.values()):
            raise ValueError(f"reward set {self.name!r} has a negative weight: {weights}")
        object.__setattr__(self, "weights", MappingProxyType(weights))

    @property
    def keys(self) -> tuple[str, ...]:
        """The registry keys, as ``reward_funcs`` lists them."""
        return tuple(self.weights)

    def yaml_weights(self) -> list[str]:
        """The weights as the strings a recipe's ``reward_weights`` holds (see :func:`format_weight`)."""
        return [format_weight(weight) for weight in self.weights.values()]


def format_weight(weight: float) -> str:
    """The shortest string that reads back as ``weight``: ``"1"`` for 1.0, ``"0.2"`` for 0.2."""
    weight = float(weight)
    return str(int(weight)) if weight.is_integer() else repr(weight)


# The merchant planner's seven rewards. Expert choice weighs most, then the rewritten question; format, reasoning and
# plan detail get 0.1 each (docs/planning_rewards.md explains the priorities).
PLANNER = RewardSet(
    "planner",
    {
        "strict_format": 0.1,
        "json_valid": 0.1,
        "think_length": 0.1,
        "think_quality": 0.1,
        "rewrite_similarity": 0.2,
        "expert_match": 0.3,
        "plan_coverage": 0.1,
    },
    "the merchant planner's seven rewards",
)

# The think-vs-no-think control run: answer_format takes strict_format's place and weight, the two think rewards go,
# and every reward both runs share keeps PLANNER's weight.
_THINK_ONLY = ("think_length", "think_quality")
PLANNER_NO_THINK = RewardSet(
    "planner_no_think",
    {
        ("answer_format" if key == "strict_format" else key): weight
        for key, weight in PLANNER.weights.items()
        if key not in _THINK_ONLY
    },
    "the planner's rewards without <think>: answer_format in place of strict_format, no think rewards",
)

# Tool-use agents on any domain (MUA-RL): the binary task completion is trained on; the partial-credit rate is logged.
AGENT = RewardSet(
    "agent",
    {"task_completion": 1.0, "task_completion_rate": 0.0},
    "task_completion (trained on) and task_completion_rate (logged)",
)

# Multi-turn GRPO with a simulated user adds the share of episodes the simulator failed, logged only.
AGENT_MULTI_TURN = RewardSet(
    "agent_multi_turn",
    {**AGENT.weights, "user_sim_failure": 0.0},
    "the agent set plus user_sim_failure (logged): how often the simulated user failed",
)

# Every set by name; a recipe names one of these in rewardkit.recipes.CATALOG.
SETS: dict[str, RewardSet] = {s.name: s for s in (PLANNER, PLANNER_NO_THINK, AGENT, AGENT_MULTI_TURN)}

__all__ = ["AGENT", "AGENT_MULTI_TURN", "PLANNER", "PLANNER_NO_THINK", "SETS", "RewardSet", "format_weight"]

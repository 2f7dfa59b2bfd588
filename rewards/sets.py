"""The reward sets that rewardkit's GRPO recipes train with: which rewards, in which order, with which weights.

A reward joins a set in its own file: ``sets = {"planner": 0.1}`` next to its formula is its weight in that set.
A set is every reward that names it, in registry order (each class's ``order``). This module declares which sets
exist and what each is for; every ``rlhf`` recipe under ``recipes/`` names one in ``rewardkit.recipes.CATALOG``,
and its ``reward_funcs:`` and ``reward_weights:`` lines are generated from that set by ``rewardkit.recipes.compose``
(``python -m rewardkit.recipes.compose --write``); a test fails when a recipe drifts from its set.

>>> SETS["planner"].keys
('strict_format', 'json_valid', 'think_length', 'think_quality', 'rewrite_similarity', 'expert_match', 'plan_coverage')
>>> SETS["planner"].yaml_weights()  # strings, because ms-swift 4.4 hands YAML list items to its subprocess verbatim
['0.1', '0.1', '0.1', '0.1', '0.2', '0.3', '0.1']
>>> dict(SETS["planner_no_think"].weights)
{'answer_format': 0.1, 'json_valid': 0.1, 'rewrite_similarity': 0.2, 'expert_match': 0.3, 'plan_coverage': 0.1}
>>> SETS["agent_multi_turn"].weights["task_completion"]  # trained on; its other members are logged (weight 0)
1.0
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from rewardkit.rewards._found import RegistryError
from rewardkit.rewards.registry import REWARDS


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


# Every set: its name and what it is for. Its members and weights are declared by the rewards (``sets``).
DESCRIPTIONS: dict[str, str] = {
    # The merchant planner's seven rewards. Expert choice weighs most, then the rewritten question; format,
    # reasoning and plan detail get 0.1 each (docs/planning_rewards.md explains the priorities).
    "planner": "the merchant planner's seven rewards",
    # The think-vs-no-think control run: answer_format takes strict_format's place and weight, the two think
    # rewards go, and every reward both runs share keeps the planner's weight.
    "planner_no_think": "the planner's rewards without <think>: answer_format in place of strict_format, "
    "no think rewards",
    # Tool-use agents on any domain (MUA-RL): the binary task completion is trained on; the partial-credit rate is
    # logged.
    "agent": "task_completion (trained on) and task_completion_rate (logged)",
    # Multi-turn GRPO with a simulated user adds the share of episodes the simulator failed, logged only.
    "agent_multi_turn": "the agent set plus user_sim_failure (logged): how often the simulated user failed",
}


def reward_set(name: str) -> RewardSet:
    """The set ``name``: every reward that declares a weight in it, in registry order."""
    if name not in DESCRIPTIONS:
        raise KeyError(f"no reward set {name!r}; known: {', '.join(DESCRIPTIONS)}")
    for key, cls in REWARDS.items():
        unknown = [s for s in cls.sets if s not in DESCRIPTIONS]
        if unknown:
            raise RegistryError(
                f"{cls.__name__} ({key}) joins unknown reward set(s) {unknown}; known: {', '.join(DESCRIPTIONS)} "
                f"(a new set is declared in rewards/sets.py)"
            )
    weights = {key: cls.sets[name] for key, cls in REWARDS.items() if name in cls.sets}
    return RewardSet(name, weights, DESCRIPTIONS[name])


class Sets(Mapping[str, RewardSet]):
    """Every set by name, built from the rewards' declarations when first read."""

    def __getitem__(self, name: str) -> RewardSet:
        return reward_set(name)

    def __iter__(self) -> Iterator[str]:
        return iter(DESCRIPTIONS)

    def __len__(self) -> int:
        return len(DESCRIPTIONS)


SETS = Sets()


def __getattr__(name: str) -> RewardSet:
    """``PLANNER``, ``PLANNER_NO_THINK``, ``AGENT``, ``AGENT_MULTI_TURN``: the set of that name."""
    if name.isupper() and name.lower() in DESCRIPTIONS:
        return reward_set(name.lower())
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DESCRIPTIONS", "SETS", "RewardSet", "Sets", "format_weight", "reward_set"]

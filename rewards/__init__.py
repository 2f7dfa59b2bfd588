"""rewardkit's rewards (planning and task completion), registered in ms-swift's ``orms`` registry.

Three ways in, one set of classes (all imports are absolute, through the
installed ``rewardkit`` package):

- ``import rewardkit.rewards``;
- ``swift rlhf --external_plugins rewards/`` (ms-swift <= 4.4 imports the
  folder as a top-level package named ``rewards``);
- ``swift rlhf --external_plugins rewards/__init__.py`` (ms-swift >= 4.5 loads
  the file under a generated module name).

Each way ends in :func:`register`, which maps the keys to the very same class
objects, so loading twice is harmless.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from rewardkit.rewards.answer_format import AnswerFormat
from rewardkit.rewards.expert_match import ExpertMatch
from rewardkit.rewards.json_valid import JsonValid
from rewardkit.rewards.plan_coverage import PlanCoverage
from rewardkit.rewards.rewrite_similarity import RewriteSimilarity
from rewardkit.rewards.strict_format import StrictFormat
from rewardkit.rewards.task_completion import TaskCompletion
from rewardkit.rewards.task_completion_rate import TaskCompletionRate
from rewardkit.rewards.think_length import ThinkLength
from rewardkit.rewards.think_quality import ThinkQuality
from rewardkit.rewards.user_sim_failure import UserSimFailure

# Registry key -> class; the class name is what ms-swift logs (rewards/<Class>/mean).
PLANNING_REWARDS: dict[str, type] = {
    "strict_format": StrictFormat,
    "json_valid": JsonValid,
    "think_length": ThinkLength,
    "think_quality": ThinkQuality,
    "rewrite_similarity": RewriteSimilarity,
    "expert_match": ExpertMatch,
    "plan_coverage": PlanCoverage,
    # For answer-only (no-think) runs, in place of strict_format.
    "answer_format": AnswerFormat,
}
# Multi-turn tool-use agents on a tau2 domain (MUA-RL): the binary reward and its weight-0 metric.
EPISODE_REWARDS: dict[str, type] = {
    "task_completion": TaskCompletion,
    "task_completion_rate": TaskCompletionRate,
    "user_sim_failure": UserSimFailure,
}
REWARDS: dict[str, type] = {**PLANNING_REWARDS, **EPISODE_REWARDS}

# The merchant-planner document's seven rewards and weights, in REWARDS order.
DOCUMENT_WEIGHTS: dict[str, float] = {
    "strict_format": 0.1,
    "json_valid": 0.1,
    "think_length": 0.1,
    "think_quality": 0.1,
    "rewrite_similarity": 0.2,
    "expert_match": 0.3,
    "plan_coverage": 0.1,
}


def register(registry: MutableMapping[str, Any] | None = None) -> MutableMapping[str, Any]:
    """Add every reward to ``registry`` (default: ms-swift's ``orms``); idempotent."""
    if registry is None:
        from swift.rewards import orms

        registry = orms
    for key, cls in REWARDS.items():
        current = registry.get(key)
        if current is not None and current is not cls and current.__module__ != cls.__module__:
            raise ValueError(f"orms[{key!r}] already holds {current!r}; refusing to replace it with {cls!r}")
        registry[key] = cls
    return registry


register()

__all__ = [
    "DOCUMENT_WEIGHTS",
    "EPISODE_REWARDS",
    "PLANNING_REWARDS",
    "REWARDS",
    "AnswerFormat",
    "ExpertMatch",
    "JsonValid",
    "PlanCoverage",
    "RewriteSimilarity",
    "StrictFormat",
    "TaskCompletion",
    "TaskCompletionRate",
    "ThinkLength",
    "ThinkQuality",
    "UserSimFailure",
    "register",
]

"""rewardkit's rewards (planning and task completion), for ms-swift's ``orms`` registry.

Importing this package has no side effects: it defines the reward classes and
the key -> class maps, and imports neither ms-swift nor any config. The keys
reach ms-swift's ``orms`` in one of three ways, each ending in :func:`register`:

- ``import rewardkit.rewards`` then ``rewardkit.rewards.register()`` (from your
  own code or plugin file);
- ``swift rlhf --external_plugins rewards/`` (ms-swift <= 4.4 imports the
  folder as a top-level package named ``rewards``);
- ``swift rlhf --external_plugins rewards/__init__.py`` (ms-swift loads the file
  under a module name of its own: ``__init__`` on 4.4, a generated one on >= 4.5).

The last two load this very file under a name other than ``rewardkit.rewards``,
which is what the bottom of the file keys on. All imports are absolute, through
the installed ``rewardkit`` package, so every way maps the keys to the very same
class objects and loading twice is harmless.

The answer format the planning rewards read (parse, schema, plan) is public in
:mod:`rewardkit.rewards.answers`.

Imports only the layers below it (rewardkit.config, rewardkit.files, rewardkit.envs; see rewardkit.layers).
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from rewardkit.rewards._base import MissingColumnError
from rewardkit.rewards.answer_format import AnswerFormat
from rewardkit.rewards.config import RewardConfig, SharedConfig
from rewardkit.rewards.expert_match import ExpertMatch
from rewardkit.rewards.json_valid import JsonValid
from rewardkit.rewards.plan_coverage import PlanCoverage
from rewardkit.rewards.rewrite_similarity import RewriteSimilarity
from rewardkit.rewards.sets import AGENT, AGENT_MULTI_TURN, PLANNER, PLANNER_NO_THINK, SETS, RewardSet
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
# Multi-turn tool-use agents on any domain (MUA-RL): the binary reward and its weight-0 metric.
EPISODE_REWARDS: dict[str, type] = {
    "task_completion": TaskCompletion,
    "task_completion_rate": TaskCompletionRate,
    "user_sim_failure": UserSimFailure,
}
REWARDS: dict[str, type] = {**PLANNING_REWARDS, **EPISODE_REWARDS}

# The merchant planner's seven rewards and their weights, in REWARDS order; declared once, with the no-think and
# agent sets, in rewardkit.rewards.sets. A plain copy: changing it does not change the set or the recipes.
PLANNER_WEIGHTS: dict[str, float] = dict(PLANNER.weights)


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


__all__ = [
    "AGENT",
    "AGENT_MULTI_TURN",
    "EPISODE_REWARDS",
    "PLANNER",
    "PLANNER_NO_THINK",
    "PLANNER_WEIGHTS",
    "PLANNING_REWARDS",
    "REWARDS",
    "SETS",
    "AnswerFormat",
    "ExpertMatch",
    "JsonValid",
    "MissingColumnError",
    "PlanCoverage",
    "RewardConfig",
    "RewardSet",
    "RewriteSimilarity",
    "SharedConfig",
    "StrictFormat",
    "TaskCompletion",
    "TaskCompletionRate",
    "ThinkLength",
    "ThinkQuality",
    "UserSimFailure",
    "register",
]

# Registration is a side effect of the plugin entry file only. `import rewardkit.rewards` (the installed package)
# runs this file as "rewardkit.rewards" and must not import ms-swift; ms-swift's --external_plugins runs the same
# file as "rewards" (folder form, <= 4.4), "__init__" (file form, 4.4) or "_swift_external_<hash>" (file form,
# >= 4.5), and there registering is the whole point of loading it.
if __name__ != "rewardkit.rewards":
    register()

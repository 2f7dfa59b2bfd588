"""rewardkit's rewards (planning and task completion), for ms-swift's ``orms`` registry.

A reward is one file of this folder, named by its registry key: a function made a reward class by :func:`reward`,
or a small class when it holds state (see :mod:`rewardkit.rewards.registry`). This file names each for editors and
type checkers; at run time ``from rewardkit.rewards import ThinkLength`` imports ``think_length.py`` alone, and
:data:`REWARDS` imports each module when first asked for it (an installed package's rewards, the
``rewardkit.rewards`` entry points, likewise). Importing this package has no side effects and does not import
ms-swift. The keys reach ms-swift's ``orms`` in one of three ways, each ending in :func:`register`:

- ``import rewardkit.rewards`` then ``rewardkit.rewards.register()`` (from your own code or plugin file);
- ``swift rlhf --external_plugins rewards/`` (ms-swift <= 4.4 imports the folder as a top-level package named
  ``rewards``);
- ``swift rlhf --external_plugins rewards/__init__.py`` (ms-swift loads the file under a module name of its own:
  ``__init__`` on 4.4, a generated one on >= 4.5).

The last two load this very file under a name other than ``rewardkit.rewards``, which is what the bottom of the
file keys on: they register every reward and check the whole ``$REWARDKIT_CONFIG`` before training starts. All
imports are absolute, through the installed ``rewardkit`` package, so every way maps the keys to the very same
class objects and loading twice is harmless.

The answer format the planning rewards read (parse, schema, plan) is public in :mod:`rewardkit.rewards.answers`.

Imports only the layers below it (rewardkit.config, rewardkit.files, rewardkit.envs; see rewardkit.layers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rewardkit.rewards._base import MissingColumnError, PlanningReward, Reward, known_gaps, reward
from rewardkit.rewards._found import key_of, reward_modules
from rewardkit.rewards.config import RewardConfig, SharedConfig, load_section
from rewardkit.rewards.registry import REWARDS, config_schema, register, reward_class
from rewardkit.rewards.sets import SETS, RewardSet

if TYPE_CHECKING:  # what an editor and a type checker see; at run time each is imported when first named
    from rewardkit.rewards._similarity import load_sentence_model
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


def __getattr__(name: str) -> Any:
    """The lazy names: each reward class by its name (``ThinkLength``: its module alone is imported, so a planning
    reward never pulls in an environment), an installed package's too; the sets by theirs (``PLANNER``); and the
    registry's views (``PLANNER_WEIGHTS``, ``PLANNING_REWARDS``, ``EPISODE_REWARDS``); ``load_sentence_model``, the
    embedding backend's loader (numpy and rapidfuzz on first use)."""
    if name[:1].isupper() and not name.isupper() and key_of(name) in reward_modules():
        return reward_class(key_of(name))
    if name.isupper() and name.lower() in SETS:
        return SETS[name.lower()]
    if name == "PLANNER_WEIGHTS":  # the planner set's weights, as a plain dict (a copy)
        return dict(SETS["planner"].weights)
    if name == "PLANNING_REWARDS":  # the rewards of a planning answer against its gold
        return {k: cls for k, cls in REWARDS.items() if issubclass(cls, PlanningReward)}
    if name == "load_sentence_model":  # the sentence-embedding backend's model, loaded once per process
        from rewardkit.rewards._similarity import load_sentence_model

        return load_sentence_model
    if name == "EPISODE_REWARDS":  # the tool-use ones: they read the episode's 'messages' (as the testing kit does)
        return {k: cls for k, cls in REWARDS.items() if "messages" in cls.columns}
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
    "PlanningReward",
    "Reward",
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
    "config_schema",
    "known_gaps",
    "load_section",
    "load_sentence_model",
    "register",
    "reward",
    "reward_class",
]

# Registration is a side effect of the plugin entry file only. `import rewardkit.rewards` (the installed package)
# runs this file as "rewardkit.rewards" and must not import ms-swift; ms-swift's --external_plugins runs the same
# file as "rewards" (folder form, <= 4.4), "__init__" (file form, 4.4) or "_swift_external_<hash>" (file form,
# >= 4.5), and there registering, and failing on a bad config before the model loads, is the whole point.
if __name__ != "rewardkit.rewards":
    register()
    config_schema().load()

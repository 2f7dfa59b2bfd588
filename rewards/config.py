"""The rewards' configuration: the schema they read, its loader, and the sections (the public facade).

:data:`REWARD_SCHEMA` is :class:`SharedConfig` (top-level keys) plus every reward's section
(``rewards/_sections.py``); ``user_sim:`` and ``rollout:`` belong to the multi-turn loop, which checks them
(``rewardkit.loop.config.RUN_SCHEMA``): here they only have to be mappings. The machinery is
:mod:`rewardkit.config`; the example file ``recipes/planning/reward_config.yaml`` and the key table of
``docs/config.md`` are generated from the declarations (``rewardkit config example|table|check``), and
``tests/test_config_drift.py`` fails when they drift.

Values come from the defaults, then the YAML file named by ``$REWARDKIT_CONFIG`` (read and parsed once per process
and file version), then a reward's ``config=`` argument. A reward reads its section with
``self.config.section(ThinkLengthConfig)`` (or ``self.config.think_length``). Code that must not depend on the
environment (the data builders) builds its config with :meth:`RewardConfig.of`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

from rewardkit.config import Config, ConfigError, ConfigSchema, read_config_file
from rewardkit.rewards._sections import (
    ExpertMatchConfig,
    PlanCoverageConfig,
    PlanCoverageWeights,
    RewriteSimilarityConfig,
    SharedConfig,
    TaskCompletionConfig,
    ThinkLengthConfig,
    ThinkQualityConfig,
)

S = TypeVar("S")

REFERENCE = "recipes/planning/reward_config.yaml"  # every key, its default and its meaning (generated)

# Sections of the multi-turn loop (a higher layer): accepted here as mappings; RUN_SCHEMA checks their keys.
LOOP_SECTIONS = {
    "user_sim": "the user simulator of multi-turn rollouts (see recipes/agent/mua_rl_config.yaml); "
    "its keys are checked by rewardkit.loop.user_sim.config.",
    "rollout": "when a multi-turn episode stops: turns, tokens, tool errors (see recipes/agent/mua_rl_config.yaml); "
    "its keys are checked by rewardkit.loop.config.",
}


class RewardConfig(Config):
    """The rewards' configuration: :class:`SharedConfig` plus one instance of every reward section.

    ``cfg.section(ThinkLengthConfig)`` is a reward's section, typed; ``cfg.think_length`` is the same by key.
    The shared settings read as top-level attributes too (``cfg.schema``, ``cfg.backend``), as in the YAML.
    """

    @classmethod
    def of(cls, *parts: Any) -> RewardConfig:
        """The defaults with whole sections replaced by ``parts`` (instances of SharedConfig or of a section class),
        checked like a file; never reads ``$REWARDKIT_CONFIG``. For code whose output must not depend on the
        environment, such as the data builders."""
        return REWARD_SCHEMA.of(*parts)


# In the order the example file and the key table list them.
REWARD_SECTIONS: tuple[type, ...] = (
    ThinkLengthConfig,
    ThinkQualityConfig,
    RewriteSimilarityConfig,
    ExpertMatchConfig,  # shared by ExpertMatch, PlanCoverage and the gold checks
    PlanCoverageConfig,
    TaskCompletionConfig,
)

REWARD_SCHEMA = ConfigSchema(
    shared=SharedConfig,
    sections=REWARD_SECTIONS,
    reserved=LOOP_SECTIONS,
    reference=REFERENCE,
    config_class=RewardConfig,
)


def load_config(overrides: Mapping[str, Any] | None = None, path: str | os.PathLike[str] | None = None) -> RewardConfig:
    """Defaults <- YAML file (``path`` or ``$REWARDKIT_CONFIG``) <- ``overrides``, checked at each step."""
    return REWARD_SCHEMA.load(overrides, path)


def load_section(cls: type[S], config: RewardConfig | Mapping[str, Any] | None = None) -> S:
    """One section: of ``config`` if it is a RewardConfig, else of ``load_config(config)``."""
    return (config if isinstance(config, RewardConfig) else load_config(config)).section(cls)


__all__ = [
    "LOOP_SECTIONS",
    "REWARD_SCHEMA",
    "REWARD_SECTIONS",
    "ConfigError",
    "ExpertMatchConfig",
    "PlanCoverageConfig",
    "PlanCoverageWeights",
    "RewardConfig",
    "RewriteSimilarityConfig",
    "SharedConfig",
    "TaskCompletionConfig",
    "ThinkLengthConfig",
    "ThinkQualityConfig",
    "load_config",
    "load_section",
    "read_config_file",
]

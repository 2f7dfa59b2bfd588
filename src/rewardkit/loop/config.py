"""The ``rollout:`` section of ``$REWARDKIT_CONFIG``: when a multi-turn episode must stop."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from rewardkit.rewards.config import ConfigError


@dataclass(frozen=True)
class RolloutLimits:
    """Stop conditions besides the user's and the agent's own stop signals.

    - ``max_turns``: assistant turns per episode (MUA-RL: 30). ms-swift's ``--max_turns``, when set, wins.
    - ``token_budget``: tokens the policy may sample over the whole episode.
    - ``error_budget``: tool results with an error code (schema violations included) per episode.
    - ``max_failed_share``: if more than this share of a batch's episodes end in ``user_sim_error``,
      training stops with a message naming the simulator endpoint.
    """

    max_turns: int = 30
    token_budget: int = 16384
    error_budget: int = 10
    max_failed_share: float = 0.5


_RANGES: dict[str, tuple[type, float, float]] = {
    "max_turns": (int, 1, math.inf),
    "token_budget": (int, 1, math.inf),
    "error_budget": (int, 1, math.inf),
    "max_failed_share": (float, 0.0, 1.0),
}


def load_rollout_limits(raw: Any, source: str) -> RolloutLimits:
    """Validate the ``rollout`` mapping (``None``: defaults); errors name ``source`` and the key."""
    if raw is None:
        return RolloutLimits()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: rollout: must be a mapping of {sorted(_RANGES)}")
    valid = [f.name for f in fields(RolloutLimits)]
    for key, value in raw.items():
        if key not in _RANGES:
            raise ConfigError(f"{source}: rollout.{key}: unknown key; valid keys here are {valid}")
        kind, low, high = _RANGES[key]
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not numeric or (kind is int and not isinstance(value, int)):
            raise ConfigError(f"{source}: rollout.{key}: expected {'an integer' if kind is int else 'a number'}")
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(f"{source}: rollout.{key}: {value!r} is outside [{low}, {high}]")
    return RolloutLimits(**raw)

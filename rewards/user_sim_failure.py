"""UserSimFailure: the share of episodes whose user simulator failed, logged as a weight-0 metric."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from rewardkit.envs.termination import Termination
from rewardkit.rewards._base import Reward, known_gaps
from rewardkit.rewards._episodes import termination


class UserSimFailure(Reward):
    """1.0 if the episode ended in ``user_sim_error``, else 0.0.

    Formula: ``float(rollout_infos["termination"] == "user_sim_error")``.
    Columns: optional ``rollout_infos`` (rows without it score 0.0).
    Range: {0.0, 1.0}; never None. Use it with weight 0: ms-swift then logs
    ``rewards/UserSimFailure/mean``, the failed share of each batch. Failed
    episodes are left out of training by the ``simulated_user`` plugin, not by this.

    Example::

        >>> from rewardkit.rewards import UserSimFailure
        >>> infos = [{"termination": "user_sim_error"}, {"termination": "user_stop"}, None]
        >>> UserSimFailure()(["", "", ""], rollout_infos=infos)
        [1.0, 0.0, 0.0]
    """

    order = 120
    sets = MappingProxyType({"agent_multi_turn": 0.0})

    may_return_none = False
    gameable = known_gaps("a weight-0 metric of rollout_infos: it never reads the completion", "*")

    optional_columns = ("rollout_infos",)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        infos = columns.get("rollout_infos") or [None] * len(completions)
        return [float(termination(info) == Termination.USER_SIM_ERROR.value) for info in infos]

"""UserSimFailure: the share of episodes whose user simulator failed, logged as a weight-0 metric."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rewardkit.envs.episode_record import EpisodeRecord
from rewardkit.envs.termination import Termination
from rewardkit.rewards._base import known_gaps, reward


def user_sim_failure(completions: list[str], rollout_infos: Sequence[Any] | None = None) -> list[float]:
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
    records = [EpisodeRecord.read(info) for info in rollout_infos or [None] * len(completions)]
    return [float(r is not None and r.termination == Termination.USER_SIM_ERROR.value) for r in records]


UserSimFailure = reward(
    user_sim_failure,
    sets={"agent_multi_turn": 0.0},
    gameable=known_gaps("a weight-0 metric of rollout_infos: it never reads the completion", "*"),
    reads_completions=False,
    order=120,
)

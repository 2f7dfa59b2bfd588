"""ms-swift plugin entry: ``swift rlhf --external_plugins plugins/simulated_user.py --multi_turn_scheduler
simulated_user``.

Registers the ``simulated_user`` multi-turn scheduler and installs the exclusion of episodes
whose user simulator failed (see :mod:`rewardkit.plugins.exclusion`).
Loading it twice is harmless.
"""

from __future__ import annotations

from swift.rollout.multi_turn import multi_turns

from rewardkit.plugins import exclusion
from rewardkit.plugins.scheduler import SimulatedUserScheduler

KEY = "simulated_user"


def register() -> None:
    current = multi_turns.get(KEY)
    if current is not None and current.__qualname__ != SimulatedUserScheduler.__qualname__:
        raise ValueError(f"multi_turns[{KEY!r}] already holds {current!r}; refusing to replace it")
    multi_turns[KEY] = SimulatedUserScheduler
    exclusion.install()


register()

"""User simulators: the customer side of multi-turn GRPO rollouts on tau2-bench tasks (MUA-RL).

``make_simulator(load_run_config().user_sim, domain)`` (``rewardkit.loop.config``) builds the one the ``user_sim``
config section names for a domain's users: ``scripted`` (model-free, for CI) or ``openai`` (any OpenAI-compatible
endpoint, playing the user by the domain's guidelines), optionally behind a SQLite reply cache.

- ``base.py``: what every simulator shares (the visible dialogue, stop tokens, errors);
- ``scripted.py`` and ``openai_sim.py``: the two simulators; ``cache.py``: the reply cache;
- ``config.py``: the ``user_sim`` config section, validated before the first rollout.

A simulator reads a task through :mod:`rewardkit.envs.tasks` and the customer's words through
:mod:`rewardkit.envs.scenario`, as the builder does; it never imports ms-swift, so it runs the same
inside and outside training.
"""

from rewardkit.loop.user_sim.base import (
    GREETING,
    GREETINGS,
    OUT_OF_SCOPE,
    STOP,
    TRANSFER,
    Progress,
    SimulatorError,
    Turn,
    UserSimulator,
)
from rewardkit.loop.user_sim.config import (
    UserSimConfig,
    load_user_sim_config,
    make_simulator,
)

__all__ = [
    "GREETING",
    "GREETINGS",
    "OUT_OF_SCOPE",
    "STOP",
    "TRANSFER",
    "Progress",
    "SimulatorError",
    "Turn",
    "UserSimConfig",
    "UserSimulator",
    "load_user_sim_config",
    "make_simulator",
]

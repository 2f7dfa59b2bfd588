"""User simulators: the customer side of multi-turn GRPO rollouts on tau2-bench tasks (MUA-RL).

``make_simulator(user_sim_config_from_env())`` builds the one the ``user_sim`` config section
names: ``scripted`` (model-free, for CI) or ``openai`` (any OpenAI-compatible endpoint),
optionally behind a SQLite reply cache.

- ``base.py``: what every simulator shares (the visible dialogue, stop tokens, errors);
- ``scripted.py`` and ``openai_sim.py``: the two simulators; ``cache.py``: the reply cache;
- ``config.py``: the ``user_sim`` config section, validated before the first rollout.

May import: ``rewardkit.envs`` and ``rewardkit.rewards``. Never the rollout loop, the
builders, the CLI or ms-swift (a simulator runs the same inside and outside ms-swift). Today
``scripted.py`` still reads two text rules from the tau2 builder: a known exception, listed in
``tests/test_layout.py``, that should move here.
"""

from rewardkit.loop.user_sim.base import (
    GREETING,
    OUT_OF_SCOPE,
    STOP,
    STOP_TOKENS,
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
    user_sim_config_from_env,
)

__all__ = [
    "GREETING",
    "OUT_OF_SCOPE",
    "STOP",
    "STOP_TOKENS",
    "TRANSFER",
    "Progress",
    "SimulatorError",
    "Turn",
    "UserSimConfig",
    "UserSimulator",
    "load_user_sim_config",
    "make_simulator",
    "user_sim_config_from_env",
]

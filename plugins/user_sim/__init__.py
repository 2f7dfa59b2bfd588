"""User simulators: the customer side of multi-turn GRPO rollouts on tau2-bench tasks (MUA-RL).

``make_simulator(user_sim_config_from_env())`` builds the one the ``user_sim`` config section
names: ``scripted`` (model-free, for CI) or ``openai`` (any OpenAI-compatible endpoint),
optionally behind a SQLite reply cache.
"""

from rewardkit.plugins.user_sim.base import (
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
from rewardkit.plugins.user_sim.config import (
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

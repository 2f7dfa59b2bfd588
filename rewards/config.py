"""The configuration API other parts of rewardkit (and users) may rely on.

Each reward declares its own section (a dataclass beside its formula); this module
re-exports the reader and the error type, so callers never import the private
``_config`` module.
"""

from rewardkit.rewards._config import ConfigError, RewardConfig, SharedConfig, load_config, read_config_file

__all__ = ["ConfigError", "RewardConfig", "SharedConfig", "load_config", "read_config_file"]

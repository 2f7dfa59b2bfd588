"""Configuration machinery: declaring sections, reading ``$REWARDKIT_CONFIG``, checking and building it.

- ``declare.py``: :func:`setting` (one field: default, meaning, range), :func:`config_section` (a frozen
  dataclass as a ``key:`` section), :class:`ConfigError`, and the JSON Schema derived from the type hints;
- ``read.py``: the YAML file (``$REWARDKIT_CONFIG`` or a path), parsed once per version of the file;
- ``load.py``: :class:`ConfigSchema`, an explicit list of sections that validates (messages name the file and
  the dotted key), merges defaults <- file <- overrides <- flags and builds a :class:`Config`;
- ``origin.py``: where each value came from (``cfg.origin("user_sim.timeout_s")``: default, the file, a flag);
- ``reference.py``: the example YAML file and the Markdown key table a schema generates.

Which sections exist is not known here: each layer composes its own schema (the rewards':
``rewardkit.rewards.registry.config_schema()``; the whole file's: ``rewardkit.loop.config.RUN_SCHEMA``), and
``rewardkit config example|table|check`` writes and checks the generated reference.

May import: nothing else of rewardkit (the lowest layer).
"""

from rewardkit.config.declare import ConfigError, config_section, setting
from rewardkit.config.load import Config, ConfigSchema
from rewardkit.config.read import ENV_VAR, read_config_file

__all__ = ["ENV_VAR", "Config", "ConfigError", "ConfigSchema", "config_section", "read_config_file", "setting"]

"""rewardkit: composable GRPO rewards and recipes for ms-swift.

One package from five folders (``pyproject.toml`` maps each to its name):

- ``rewards/`` is ``rewardkit.rewards``: the reward functions, for ms-swift's ``orms`` and TRL;
- ``recipes/`` is ``rewardkit.recipes``: ms-swift YAML recipes, their catalogue and reward sets;
- ``data_builders/`` is ``rewardkit.data_builders``: raw data -> ms-swift JSONL datasets;
- ``plugins/`` is ``rewardkit.plugins``: tool environments, episodes, user simulators and the
  multi-turn scheduler;
- ``src/rewardkit/`` (this folder): the ``rewardkit`` command line (``cli.py``, and one
  ``cli_<command>.py`` per subcommand with ``add_parsers`` and ``cmd_<command>_<action>``), the
  recipe pipelines, scoring, the GRPO log summary, safe file output and the tiny test model.

This folder is the top layer: nothing else imports it. May import: ``rewardkit.rewards``,
``rewardkit.recipes``, ``rewardkit.data_builders``, ``rewardkit.envs``,
``rewardkit.loop``, ``rewardkit.envs.termination`` and
``rewardkit.loop.user_sim``. Never ms-swift's entry points (``plugins/``,
``plugins/tau2_user.py``): the CLI runs ``swift`` as a command instead. The import directions of
every folder are checked by ``tests/test_layout.py``.
"""

__version__ = "0.1.0"

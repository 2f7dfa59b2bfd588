"""ms-swift plugins other than rewards, and the tool-use world they run in.

- ``envs/``: tool environments over real databases (tau2's retail domain on SQLite), the domain
  registry and the reader of an agent's tool calls. The lowest layer: the rewards, the builders,
  the other plugins and the CLI all use it.
- ``user_sim/``: the simulated customers (scripted for CI, or any OpenAI-compatible model), their
  config section and reply cache.
- ``rollout/``: one agent <-> simulated user <-> database episode, driven by ms-swift or offline,
  and why it ended (``termination``, which the rewards read too).
- ``multi_turn/``: the ms-swift multi-turn scheduler ``tau2_user`` and the exclusion of episodes
  whose simulator failed.
- ``tau2_user.py``: the entry file for ``swift rlhf --external_plugins``; it registers the scheduler.

Layers, lowest first: ``envs`` (and ``rollout/termination.py``), ``user_sim``, ``rollout``,
``multi_turn``, ``tau2_user.py``. Each may import the ones before it and the rewards; none imports
the builders or the CLI, and only ``multi_turn`` and ``tau2_user.py`` import ms-swift at module
level. Each folder's ``__init__`` says what it may import; ``tests/test_layout.py`` checks it.

May import: nothing (this file is a docstring only, so that importing one plugin module loads no other).
"""

"""`rewardkit lint`: preflight checks of rewards, recipes and loss masks (see docs/lint.md).

- ``reward.py``: ``lint reward FILE.py:NAME``, the reward contract kit (:mod:`rewardkit.testing`) on your rows;
- ``recipe.py``: a GRPO recipe's reward keys, weights, ``num_generations`` and reward config;
  ``preflight.py``: ``lint RECIPE.yaml``, that reward set on your rows (``samples.py``: scoring one completion a
  call, rates, latency, zero-variance groups, correlation; ``gold.py``: the gold of each row);
- ``tokens.py``: ``lint tokens``, where the loss falls under ms-swift's own template and encoder
  (``token_checks.py``: each row checked before ms-swift sees it; ``attribution.py``: each token's message, from a
  second encoding with canaries);
- ``render.py``: the rich tables and the highlighted tokens.

May import every lower layer (files, config, envs, rewards, recipes, testing, data_builders, loop, runs) but the
entry point ``rewardkit.plugins`` in runs' layer (nothing imports an entry point: ``rewardkit.layers.ENTRY_POINTS``),
never its peer ``rewardkit.pipelines`` nor ``rewardkit.cli`` above it; ms-swift only inside functions.
"""

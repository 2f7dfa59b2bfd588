"""The reward contract as a library: check any reward on a few rows of its data (see docs/testing.md).

>>> from rewardkit.testing import check_reward
>>> report = check_reward(my_reward, rows)  # doctest: +SKIP
>>> report.raise_for_failures()  # doctest: +SKIP

- :func:`check_reward` runs every check and returns a :class:`Report` of :class:`Check` results;
- :func:`score` calls any reward (ms-swift or TRL style) on rows the way a trainer does;
- :func:`probes` builds the gaming probes of one row; :data:`HOSTILE` holds the hostile inputs;
- ``rewardkit.testing.pytest_plugin`` (loaded by pytest through an entry point) gives the ``reward_contract``
  fixture.

Imports only the layers below it (rewardkit.files, rewardkit.config, rewardkit.envs, rewardkit.rewards; see
rewardkit.layers), and nothing heavy: no torch, no ms-swift.
"""

from __future__ import annotations

from rewardkit.testing.calling import columns_of, declared, score
from rewardkit.testing.hostile import HOSTILE
from rewardkit.testing.kit import check_names, check_reward
from rewardkit.testing.probes import probes
from rewardkit.testing.report import Check, Report

__all__ = ["HOSTILE", "Check", "Report", "check_names", "check_reward", "columns_of", "declared", "probes", "score"]

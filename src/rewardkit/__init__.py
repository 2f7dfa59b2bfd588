"""rewardkit: composable GRPO rewards and recipes for ms-swift.

One package from five folders (``pyproject.toml`` maps each to its name): ``rewards/``,
``recipes/``, ``data_builders/`` and ``plugins/`` stay at the top of the repository because users
point ms-swift at them; everything else is a sub-package of ``src/rewardkit/`` named for what it
holds (``envs``, ``loop``, ``runs``, ``pipelines``, ``cli``, ``config``, ``files``). Which package may
import which is declared once, in :mod:`rewardkit.layers`, and checked by ``tests/test_layout.py``;
``docs/architecture.md`` walks through it.
"""

from rewardkit.errors import UserError

__all__ = ["UserError", "__version__"]
__version__ = "0.1.0"

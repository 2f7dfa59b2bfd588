"""GRPO's groups of rewards, as ms-swift scores them: the weighted total, and which groups can teach anything.

A group is the ``num_generations`` completions of one prompt in one step; ``scores`` has a row per completion and a
column per reward (NaN where a reward returned None). The total is ms-swift's ``nansum(w_i * r_i)``. A group has
**zero variance** when its totals are all equal (no advantage, no gradient), is **all correct** when every total
reaches the sum of the positive weights, **all wrong** when every total is 0. The audit of a finished run and the
live diagnostics of a running one both read these figures from here.

>>> import numpy as np
>>> scores = np.array([[1, 1], [0, 1], [1, 1], [1, 1]], dtype=float)  # two groups of two, two rewards
>>> group_shares(scores, np.array([1.0, 0.5]), 2)  # totals [1.5, 0.5] and [1.5, 1.5]
{'zero_variance': 0.5, 'all_correct': 0.5, 'all_wrong': 0.0}
"""

from __future__ import annotations

import numpy as np

TOL = 1e-6  # ms-swift's isclose(std, 0), and a total "reaching" the full weight


def totals(scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """ms-swift's weighted total over the last axis: ``nansum(w_i * r_i)``."""
    return np.nansum(scores * weights, axis=-1)


def group_shares(scores: np.ndarray, weights: np.ndarray, size: int) -> dict[str, float]:
    """The shares of the groups of ``size`` rows that are flat, all correct and all wrong."""
    total = totals(scores, weights).reshape(-1, size)
    full = weights[weights > 0].sum()
    return {
        "zero_variance": float(np.mean(total.std(axis=1) <= TOL)),
        "all_correct": float(np.mean((total >= full - TOL).all(axis=1))),
        "all_wrong": float(np.mean((np.abs(total) <= TOL).all(axis=1))),
    }

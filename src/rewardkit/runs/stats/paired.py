"""Across seeds, and paired by item: what the chains report for a model against its control.

A chain repeats its GRPO stages under several seeds. Per model, :func:`spread` gives the mean and spread of
one figure over the seeds' runs; :func:`paired_items` compares two models item by item (a task, a prompt),
each item's value first averaged over the seeds, with a paired-bootstrap percentile interval of the mean
difference. Resampling items, not runs, answers "would other tasks or prompts of this kind show it too".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from rewardkit.errors import UserError

MAX_BOOT = 100_000  # bootstrap resamples: 10^5 puts a 95% interval's ends within ~0.1% of their limit
_BOOT_CELLS = 2_000_000  # resampled indices held at once (16 MB), whatever n_boot and the item count


class PairingError(UserError, ValueError):
    """Two runs that cannot be compared: bad bootstrap settings, or no item in common."""


def bootstrap(
    diffs: np.ndarray, n_boot: int = 10_000, seed: int = 0, confidence: float = 0.95
) -> tuple[list[float], float]:
    """The ``confidence`` percentile interval of ``diffs.mean()`` over ``n_boot`` resamples of its items,
    and the share of resampled means above 0 (a one-sided indication, not a p-value)."""
    if not 1 <= n_boot <= MAX_BOOT:
        raise PairingError(f"--boot: need n_boot >= 1 and at most {MAX_BOOT} resamples, got {n_boot}")
    if not 0 < confidence < 1:  # NaN fails too
        raise PairingError(f"--confidence: need 0 < confidence < 1, got {confidence}")
    if seed < 0:
        raise PairingError(f"--seed must be an integer >= 0, got {seed}")
    n = len(diffs)
    rng = np.random.default_rng(seed)
    rows = max(1, _BOOT_CELLS // n)  # in batches: the same draws as one (n_boot, n) array
    boot = np.concatenate(
        [
            diffs[rng.integers(0, n, size=(min(rows, n_boot - start), n))].mean(axis=1)
            for start in range(0, n_boot, rows)
        ]
    )
    low, high = np.quantile(boot, [(1 - confidence) / 2, (1 + confidence) / 2])
    return [float(low), float(high)], float(np.mean(boot > 0))


def spread(values: Sequence[float | None]) -> dict[str, Any]:
    """Mean, sample standard deviation (0 for one run), min and max of one figure over the seeds' runs."""
    kept = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not kept:
        return {"mean": None, "sd": None, "min": None, "max": None, "runs": 0, "values": []}
    sd = float(np.std(kept, ddof=1)) if len(kept) > 1 else 0.0
    return {
        "mean": float(np.mean(kept)),
        "sd": sd,
        "min": min(kept),
        "max": max(kept),
        "runs": len(kept),
        "values": kept,
    }


def seed_means(runs: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Per item, the mean of its values over the runs that have it (``runs``: one {item: value} per seed)."""
    items: dict[str, list[float]] = {}
    for run in runs:
        for item, value in run.items():
            items.setdefault(item, []).append(float(value))
    return {item: float(np.mean(values)) for item, values in items.items()}


def paired_items(
    a: Sequence[Mapping[str, float]],
    b: Sequence[Mapping[str, float]],
    n_boot: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """B against A over the items both have, each item averaged over its seeds: the mean of B - A with its
    paired-bootstrap interval, and how many items went up and down."""
    ma, mb = seed_means(a), seed_means(b)
    common = sorted(ma.keys() & mb.keys())
    if not common:
        raise PairingError(f"no item in common ({len(ma)} and {len(mb)} items)")
    diffs = np.array([mb[i] - ma[i] for i in common], dtype=float)
    ci, positive = bootstrap(diffs, n_boot, seed, confidence)
    return {
        "items": len(common),
        "a": float(np.mean([ma[i] for i in common])),
        "b": float(np.mean([mb[i] for i in common])),
        "diff": float(diffs.mean()),
        "ci": ci,
        "confidence": confidence,
        "share_boot_positive": positive,
        "up": int(np.sum(diffs > 0)),
        "down": int(np.sum(diffs < 0)),
        "seeds": [len(a), len(b)],
    }

"""Scoring samples one completion at a time, and what the scores say: rates, latency, groups, correlation.

A *sample* is one row as a trainer would pass it (dataset columns plus ``completion``, or a trajectory in
``messages``). Every reward scores every sample in its own call, so that a reward that raises costs one sample's
score (counted as an error, never ending the run) and each call's time is one completion's latency.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rewardkit.testing.calling import Declared, declared, score
from rewardkit.testing.checks import shape_problem, value_problem
from rewardkit.testing.hostile import describe
from rewardkit.testing.totals import counted, weighted_total

ERROR = "error"
# Columns that are not part of a prompt's identity when samples are grouped by everything else.
SAMPLE_COLUMNS = ("completion", "completions", "name")
TRAJECTORY_COLUMNS = ("messages", "rollout_infos")


@dataclass(frozen=True)
class Cell:
    """One reward on one sample: its value (None, a float, or NaN or an infinity: ``nan``) or the error it raised
    or the kit's verdict on what it returned, and the call's time."""

    value: float | None
    error: str | None
    seconds: float

    @property
    def kind(self) -> str:
        if self.error is not None:
            return ERROR
        if self.value is None:
            return "none"
        return "ok" if math.isfinite(self.value) else "nan"

    def score(self) -> float | None:
        """The score a trainer would add: the value, None for an error."""
        return None if self.error is not None else self.value

    def number(self) -> float:
        """What the weighted sum adds: the value, or 0 for None, NaN, an infinity and an error (ms-swift's nansum,
        :func:`rewardkit.testing.totals.counted`)."""
        return counted(self.score())


def score_one(reward: Any, sample: Mapping[str, Any], promised: Declared | None = None) -> Cell:
    """``reward`` on one sample, through the kit's uniform call, judged by the kit's own ``shape`` and ``values``
    rules (``promised``: what the reward declares, default :func:`~rewardkit.testing.declared`). An exception, a
    return of the wrong shape (an int, a bool, two values) or a value outside the declared range (or a None it
    declares it never returns) is an error; NaN and an infinity are ``nan``."""
    start = time.perf_counter()
    try:
        out = score(reward, [sample])
    except Exception as exc:  # reported as the reward's error rate
        return Cell(None, describe(exc), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    problem = shape_problem(out, 1)
    if problem is not None:
        return Cell(None, problem, seconds)
    value = out[0]
    if value is not None and not math.isfinite(value):
        return Cell(value, None, seconds)
    problem = value_problem(out, promised if promised is not None else declared(reward))
    return Cell(value, None, seconds) if problem is None else Cell(None, problem, seconds)


def score_all(rewards: Mapping[str, Any], samples: Sequence[Mapping[str, Any]]) -> dict[str, list[Cell]]:
    """Reward key -> one cell per sample."""
    out = {}
    for key, reward in rewards.items():
        promised = declared(reward)
        out[key] = [score_one(reward, s, promised) for s in samples]
    return out


def weighted(cells: Mapping[str, Sequence[Cell]], weights: Mapping[str, float], i: int) -> float:
    """Sample ``i``'s weighted total, as ms-swift adds it."""
    return weighted_total(weights.values(), [cells[k][i].score() for k in weights])


def rates(cells: Sequence[Cell], labels: Sequence[str] | None = None) -> dict[str, Any]:
    """Error, None and NaN shares, p50/p99 latency per completion (ms) and the first error seen (with its
    sample's label)."""
    n = len(cells) or 1
    kinds = [c.kind for c in cells]
    ms = np.array([c.seconds * 1000 for c in cells]) if cells else np.zeros(1)
    bad = next((i for i, c in enumerate(cells) if c.error is not None), None)
    first = None if bad is None else f"{labels[bad]}: {cells[bad].error}" if labels else cells[bad].error
    return {
        "error_rate": kinds.count(ERROR) / n,
        "none_rate": kinds.count("none") / n,
        "nan_rate": kinds.count("nan") / n,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "first_error": first,
    }


def correlation(cells: Mapping[str, Sequence[Cell]]) -> dict[str, Any]:
    """Pearson correlation between the rewards over the samples every reward scored; None where a reward is
    constant on them (no correlation is defined)."""
    keys = list(cells)
    n = len(next(iter(cells.values()), []))
    usable = [i for i in range(n) if all(cells[k][i].kind == "ok" for k in keys)]
    matrix: list[list[float | None]] = [[None] * len(keys) for _ in keys]
    if len(usable) >= 2:
        data = np.array([[cells[k][i].value for i in usable] for k in keys], dtype=float)
        varies = data.std(axis=1) > 1e-12
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.corrcoef(data) if len(keys) > 1 else np.ones((1, 1))
        for a in range(len(keys)):
            for b in range(len(keys)):
                if varies[a] and varies[b]:
                    matrix[a][b] = round(float(r[a][b]), 4)
    return {"keys": keys, "samples": len(usable), "matrix": matrix}


def group_key(sample: Mapping[str, Any], by: str | None, tool_use: bool) -> str:
    """What makes two samples answers to the same prompt: the ``by`` column, else every column but the sample's."""
    if by is not None:
        return json.dumps(sample.get(by), sort_keys=True, ensure_ascii=False, default=str)
    skip = set(SAMPLE_COLUMNS) | (set(TRAJECTORY_COLUMNS) if tool_use else set())
    return json.dumps(
        {k: v for k, v in sample.items() if k not in skip}, sort_keys=True, ensure_ascii=False, default=str
    )


def expand(rows: Sequence[Mapping[str, Any]], by: str | None, tool_use: bool, size: int) -> list[list[dict[str, Any]]]:
    """GRPO groups of ``size`` samples. A row with a ``completions`` list is one prompt's samples (strings become
    ``completion``; message lists, for a tool-use set, become ``messages``); other rows are one sample each,
    grouped by :func:`group_key`. Each prompt's samples are cut into groups of ``size``, in file order; a last
    group of fewer than two samples is dropped (one sample has no variance to speak of)."""
    prompts: dict[str, list[dict[str, Any]]] = {}
    for i, row in enumerate(rows):
        many = row.get("completions")
        if isinstance(many, list):
            base = {k: v for k, v in row.items() if k != "completions"}
            samples = [
                {**base, "messages": c} if isinstance(c, list) and tool_use else {**base, "completion": c} for c in many
            ]
            prompts[f"row {i}"] = samples
            continue
        prompts.setdefault(group_key(row, by, tool_use), []).append(dict(row))
    groups = []
    for samples in prompts.values():
        for start in range(0, len(samples), size):
            chunk = samples[start : start + size]
            if len(chunk) >= 2:
                groups.append(chunk)
    return groups


def zero_variance(
    groups: Sequence[Sequence[int]], cells: Mapping[str, Sequence[Cell]], weights: Mapping[str, float]
) -> dict[str, Any]:
    """The share of groups whose scores are all equal, on the weighted total and per reward: such a group has a
    zero advantage everywhere, so GRPO learns nothing from it."""

    def flat(values: Sequence[float]) -> bool:
        return max(values) - min(values) <= 1e-9

    n = len(groups) or 1
    per = {k: sum(flat([cells[k][i].number() for i in g]) for g in groups) / n for k in cells}
    total = sum(flat([weighted(cells, weights, i) for i in g]) for g in groups) / n
    return {"groups": len(groups), "samples": sum(map(len, groups)), "weighted": total, "per_reward": per}

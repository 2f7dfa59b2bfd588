"""Auditing a GRPO run from what ms-swift wrote: per step, how its groups and rewards shaped the advantages.

A run folder holds ``args.json`` (the reward keys, weights and ``num_generations``), ``logging.jsonl`` and, with
``--log_completions true``, ``completions.jsonl``: one columnar table per logged step, a row per completion, in the
order GRPO groups them (``num_generations`` consecutive rows share a prompt). The totals and the group shares are
:mod:`rewardkit.rewards.groups`'. A reward's **share of the variance** is its part of the within-group variance of
the total: ``sum_j w_i w_j cov(r_i, r_j)`` over groups, divided by the total's (the shares sum to 1; a None counts
0, as in the nansum). The same figures at other weights, or after normalising each reward within its group first (GDPO),
come from :func:`reweigh`, without a relaunch.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.files.jsonl import read_jsonl
from rewardkit.rewards.groups import TOL, group_shares, totals


class AuditError(ValueError):
    """The folder is not a GRPO run rewardkit can read (no args.json, no completions, a missing reward column)."""


@dataclass(frozen=True)
class Run:
    """A run's reward columns (ms-swift's names), their weights, its group size, and its logged steps."""

    folder: Path
    names: tuple[str, ...]
    weights: np.ndarray
    group_size: int
    steps: list[Step]


@dataclass(frozen=True)
class Step:
    step: int
    scores: np.ndarray  # (completions, rewards), NaN where a reward returned None
    turns: list[int] | None  # multi-turn runs: each completion's num_turns
    completions: list[str]
    prompts: list[str]  # each completion's prompt, as the chat template rendered it

    def groups(self, size: int) -> np.ndarray:
        """The scores as (groups, size, rewards)."""
        return self.scores.reshape(-1, size, self.scores.shape[1])


def find_run(folder: Path) -> Path:
    """The run: ``folder`` itself when it holds ``args.json``, else the newest run folder below it (one with
    ``logging.jsonl`` beside its ``args.json``; a checkpoint's copy of ``args.json`` is not a run)."""
    if (folder / "args.json").is_file():
        return folder
    runs = [p.parent for p in folder.glob("**/args.json") if (p.parent / "logging.jsonl").is_file()]
    if not runs:
        raise AuditError(f"{folder}: no run (args.json beside logging.jsonl) here or below; point audit at a "
                         "swift rlhf --output_dir")  # fmt: skip
    return max(runs, key=lambda p: (p / "logging.jsonl").stat().st_mtime)


def column_names(reward_funcs: Sequence[str]) -> tuple[str, ...]:
    """The names ms-swift logs for ``reward_funcs``: a rewardkit key's class name, or the key itself."""
    from rewardkit.rewards import REWARDS

    return tuple(REWARDS[k].__name__ if k in REWARDS else k for k in reward_funcs)


def load_run(folder: Path) -> Run:
    folder = find_run(folder)
    args = json.loads((folder / "args.json").read_text(encoding="utf-8"))
    funcs = list(args.get("reward_funcs") or [])
    if not funcs:
        raise AuditError(f"{folder}/args.json: no reward_funcs; is this a GRPO run?")
    raw_weights = args.get("reward_weights") or [1.0] * len(funcs)
    weights = np.array([float(w) for w in raw_weights])
    size = int(args.get("num_generations") or 0)
    path = folder / "completions.jsonl"
    if not path.is_file():
        raise AuditError(f"{path}: missing; rerun with --log_completions true (audit reads every completion)")
    names = column_names(funcs)
    steps: dict[int, Step] = {}
    for i, table in enumerate(read_jsonl(path), 1):
        step = _step(table, names, size, f"{path}:{i}")
        steps.setdefault(step.step, step)  # ms-swift logs the last step's table again when training ends
    return Run(folder, names, weights, size, list(steps.values()))


def _step(table: Mapping[str, Any], names: Sequence[str], size: int, where: str) -> Step:
    missing = [n for n in names if n not in table]
    if missing:
        raise AuditError(f"{where}: no column {missing}; it has {sorted(table)}")
    columns = [[math.nan if v is None else float(v) for v in table[n]] for n in names]
    scores = np.array(columns, dtype=float).T
    if size < 1 or len(scores) % size:
        raise AuditError(f"{where}: {len(scores)} completions do not make groups of num_generations={size}")
    turns = [int(t) for t in table["num_turns"]] if "num_turns" in table else None
    prompts = [str(p) for p in table.get("prompt") or [""] * len(scores)]
    return Step(int(table["step"][0]), scores, turns, [str(c) for c in table["completion"]], prompts)


def step_figures(step: Step, weights: np.ndarray, size: int, names: Sequence[str]) -> dict[str, Any]:
    """The step's group shares and, per reward, its mean, std, zero-variance share and share of the variance."""
    groups = step.groups(size)
    filled = np.nan_to_num(groups)  # None counts 0, as in the nansum
    within = totals(groups, weights).var(axis=1).sum()
    centered = filled - filled.mean(axis=1, keepdims=True)
    cov = np.einsum("gsi,gsj->ij", centered, centered) / size  # the groups' covariance matrices, summed
    part = weights * (cov @ weights)  # reward i: w_i * sum_j w_j cov(r_i, r_j)
    shares = group_shares(step.scores, weights, size)
    out: dict[str, Any] = {"step": step.step, "groups": len(groups), **shares, "rewards": {}}
    for i, name in enumerate(names):
        values = step.scores[:, i]
        present = values[~np.isnan(values)]
        out["rewards"][name] = {
            "mean": float(present.mean()) if len(present) else None,
            "std": float(present.std()) if len(present) else None,
            "zero_variance": float(np.mean(np.nanstd(groups[:, :, i], axis=1) <= TOL)),
            "none_rate": float(np.isnan(values).mean()),
            "variance_share": float(part[i] / within) if within > TOL else None,
        }
    return out


def reweigh(run: Run, weights: np.ndarray | None = None, normalize: bool = False) -> dict[str, int]:
    """What other weights (or GDPO's normalise-then-sum) would do to the logged groups: rankings that flip, and
    groups that gain or lose variance. A ranking flips when some pair of completions changes order."""
    new_w = run.weights if weights is None else weights
    counts = {"groups": 0, "rankings_flipped": 0, "pairs_flipped": 0, "gain_variance": 0, "lose_variance": 0}
    for step in run.steps:
        for group in step.groups(run.group_size):
            old = totals(group, run.weights)
            scored = _normalized(group) if normalize else group
            new = totals(scored, new_w)
            flips = _flipped_pairs(old, new)
            counts["groups"] += 1
            counts["pairs_flipped"] += flips
            counts["rankings_flipped"] += flips > 0
            was, now = bool(old.std() > TOL), bool(new.std() > TOL)
            counts["gain_variance"] += now and not was
            counts["lose_variance"] += was and not now
    return counts


def _normalized(group: np.ndarray) -> np.ndarray:
    """Each reward standardised within the group, (r - mean) / std; a constant reward (or all None) becomes 0."""
    mean, std = np.nanmean(group, axis=0), np.nanstd(group, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (group - mean) / std
    return np.where(std > TOL, out, 0.0)


def _flipped_pairs(old: np.ndarray, new: np.ndarray) -> int:
    """Pairs (a, b) strictly ordered one way by ``old`` and strictly the other way, or tied, by ``new``, and the
    pairs tied by ``old`` that ``new`` orders: every change of the within-group ranking."""
    d_old = np.sign(np.round(old[:, None] - old[None, :], 9))
    d_new = np.sign(np.round(new[:, None] - new[None, :], 9))
    return int(np.triu(d_old != d_new, k=1).sum())

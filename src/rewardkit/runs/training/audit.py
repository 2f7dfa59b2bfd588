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

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.errors import UserError
from rewardkit.files.jsonl import json_problem, kind, lines
from rewardkit.loop.rollouts import FILE
from rewardkit.rewards.groups import TOL, group_shares, totals
from rewardkit.runs.episodes.records import is_count, is_counts, is_number


class AuditError(UserError, ValueError):
    """The folder is not a GRPO run rewardkit can read: no args.json or completions, or a file in it that does not
    hold what ms-swift (or the live diagnostics) writes; the message names ``file:line`` and the key."""


RUN_FILES = ("args.json", "logging.jsonl", "completions.jsonl", FILE)  # what ms-swift and the diagnostics write
GDPO_EPS = 1e-8  # ms-swift's, for GDPO's per-reward and batch standard deviations
MAX_WEIGHT = 1e6  # |a reward weight| at most this (audit, lint RECIPE): weight x score and their sums stay finite
COUNTS = ("requests", "retries", "failures", "cache_hits", "errors", "prompt_tokens", "completion_tokens")
_BAD = object()  # a cell that is not what its column holds


@dataclass(frozen=True)
class Run:
    """A run's reward columns (ms-swift's names), their weights, its group size, its logged steps, and the rest of
    its ``args.json`` (the loss type, the reward scaling, the starting model)."""

    folder: Path
    names: tuple[str, ...]
    weights: np.ndarray
    group_size: int
    steps: list[Step]
    args: Mapping[str, Any]


@dataclass(frozen=True)
class Step:
    step: int
    scores: np.ndarray  # (completions, rewards), NaN where a reward returned None
    turns: list[int] | None  # multi-turn runs: each completion's num_turns
    completions: list[str]
    prompts: list[str]  # each completion's prompt, as the chat template rendered it
    advantages: np.ndarray | None = None  # what the trainer used, when it logged them

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
        raise AuditError(
            f"{folder}: no run (args.json beside logging.jsonl) here or below; point audit at a swift rlhf --output_dir"
        )
    return max(runs, key=lambda p: (p / "logging.jsonl").stat().st_mtime)


def run_inputs(run: Path) -> list[tuple[str, Path]]:
    """The run's own files, for :func:`~rewardkit.files.outputs.check_outputs`: what audit and view read, and the
    log the trainer keeps appending to; none of them is ever an output."""
    return [("run file", run / name) for name in RUN_FILES]


def column_names(reward_funcs: Sequence[str]) -> tuple[str, ...]:
    """The names ms-swift logs for ``reward_funcs``: a rewardkit key's class name, or the key itself."""
    from rewardkit.rewards import REWARDS

    return tuple(REWARDS[k].__name__ if k in REWARDS else k for k in reward_funcs)


def _camel(key: str) -> str:
    """``letter_e`` -> ``LetterE``: the class name a plugin's reward key conventionally has."""
    return "".join(part[:1].upper() + part[1:] for part in key.split("_"))


def weight(value: Any) -> float | None:
    """A reward weight, a number or its text (``args.json`` and ``--weights`` hold either), when it is finite and
    within +-``MAX_WEIGHT``; else None."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    return float(value) if is_number(value) and abs(value) <= MAX_WEIGHT else None


def load_run(folder: Path) -> Run:
    """The run at or below ``folder``, every value audit reads checked first."""
    folder = find_run(folder)
    args, (names, weights, size) = _read_args(folder / "args.json")
    path = folder / "completions.jsonl"
    if not path.is_file():
        raise AuditError(f"{path}: missing; rerun with --log_completions true (audit reads every completion)")
    steps: dict[int, Step] = {}
    for line in lines(path, strict=False):  # ms-swift writes NaN for a reward that returned None
        if line.problem is not None:
            raise AuditError(f"{line.where(path)}: {line.problem}")
        if not steps and isinstance(line.value, dict):  # a plugin's own reward: ms-swift logs its class's name
            names = tuple(n if n in line.value or _camel(n) not in line.value else _camel(n) for n in names)
        step = _step(line.value, names, size, line.where(path))
        steps.setdefault(step.step, step)  # ms-swift logs the last step's table again when training ends
    if not steps:
        raise AuditError(f"{path}: no logged step; let the run log one (--logging_steps), then audit it")
    return Run(folder, names, weights, size, list(steps.values()), args)


def _read_args(path: Path) -> tuple[dict[str, Any], tuple[tuple[str, ...], np.ndarray, int]]:
    """``args.json``, and its reward columns, their weights and the group size."""
    args, problem = json_problem(path.read_bytes().decode("utf-8", "replace"), strict=False)
    if problem is None and not isinstance(args, dict):
        problem = f"expected the object of ms-swift's arguments, got {kind(args)}"
    if problem is not None:
        raise AuditError(f"{path}: {problem}")
    funcs = args.get("reward_funcs")
    if not funcs:
        raise AuditError(f"{path}: no reward_funcs; is this a GRPO run?")
    if not (isinstance(funcs, list) and all(isinstance(f, str) and f for f in funcs)):
        raise AuditError(f"{path}: reward_funcs must be a list of reward names, got {kind(funcs)}")
    raw = args.get("reward_weights")
    raw = [1.0] * len(funcs) if raw is None or raw == [] else raw
    if not isinstance(raw, list) or len(raw) != len(funcs):
        got = f"{len(raw)} weights" if isinstance(raw, list) else kind(raw)
        raise AuditError(
            f"{path}: reward_weights must be a list of one weight per reward_funcs entry ({len(funcs)}), got {got}"
        )
    for i, value in enumerate(raw):
        if weight(value) is None:
            raise AuditError(
                f"{path}: reward_weights[{i}] must be a finite number from -{MAX_WEIGHT:,.0f} to {MAX_WEIGHT:,.0f}, "
                f"got {kind(value)}"
            )
    size = args.get("num_generations")
    if not (isinstance(size, int) and not isinstance(size, bool) and size >= 1):
        raise AuditError(f"{path}: num_generations must be an integer >= 1 (completions per prompt), got {kind(size)}")
    return args, (column_names(funcs), np.array([weight(w) for w in raw]), size)


def _score(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return math.nan  # a reward that returned None: ms-swift logs null, or NaN
    return float(value) if is_number(value) else _BAD


def _step_number(value: Any) -> Any:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 18:
        value = int(value)  # ms-swift logs the step as text
    return value if is_count(value) else _BAD


# What a cell of a column must be: (read it, or _BAD; what it should be).
_STEP = (_step_number, "the step's number")
_TURNS = (lambda v: v if is_count(v) else _BAD, "an integer >= 0")
_TEXT = (str, "text")
_REWARD = (_score, "a finite number, or null or NaN for a reward that returned None")
_ADVANTAGE = (lambda v: float(v) if is_number(v) else _BAD, "a finite number")


def _column(table: Mapping[str, Any], key: str, rows: int, where: str, cell: tuple[Any, str]) -> list[Any]:
    """Column ``key`` of a table of ``rows`` rows, each cell read by ``cell``; a column of another length is a
    damaged log."""
    values = table[key]
    if not isinstance(values, list) or len(values) != rows:
        got = f"{len(values)} values" if isinstance(values, list) else kind(values)
        raise AuditError(
            f"{where}: column {key!r} must be a list of {rows} values, as many as 'step' has, got "
            f"{got}; the log is damaged: audit reads only whole tables"
        )
    read, want = cell
    cells = [read(v) for v in values]
    for i, value in enumerate(cells):
        if value is _BAD:
            raise AuditError(f"{where}: column {key!r}[{i}] must be {want}, got {kind(values[i])}")
    return cells


def _step(table: Mapping[str, Any], names: Sequence[str], size: int, where: str) -> Step:
    missing = [n for n in ("step", "completion", *names) if n not in table]
    if missing:
        raise AuditError(f"{where}: no column {missing}; it has {sorted(table)}")
    if not isinstance(table["step"], list):
        raise AuditError(
            f"{where}: column 'step' must be a list, the step's number per completion, got {kind(table['step'])}"
        )
    rows = len(table["step"])
    if not rows:
        raise AuditError(f"{where}: no completion in this step's table")
    number = _column(table, "step", rows, where, _STEP)[0]
    scores = np.array([_column(table, n, rows, where, _REWARD) for n in names], dtype=float).T
    if rows % size:
        raise AuditError(f"{where}: {rows} completions do not make groups of num_generations={size}")
    turns = _column(table, "num_turns", rows, where, _TURNS) if "num_turns" in table else None
    prompts = _column(table, "prompt", rows, where, _TEXT) if "prompt" in table else [""] * rows
    advantages = None
    if "advantages" in table:
        advantages = np.array(_column(table, "advantages", rows, where, _ADVANTAGE), dtype=float)
    return Step(number, scores, turns, _column(table, "completion", rows, where, _TEXT), prompts, advantages)


def read_rollouts(run: Path) -> dict[int, dict[str, Any]]:
    """The live diagnostics' summary of each step (``rollouts.jsonl``, strict JSON), every field audit reads
    checked; none without the file."""
    path = run / FILE
    if not path.is_file():
        return {}
    out = {}
    for line in lines(path):
        problem = line.problem or _rollout_problem(line.value)
        if problem is not None:
            raise AuditError(f"{line.where(path)}: {problem}; the live diagnostics write this file: remove the line")
        out[line.value["step"]] = line.value
    return out


def _rollout_problem(summary: Mapping[str, Any]) -> str | None:
    for key in ("step", "episodes", "excluded", "tool_errors"):
        if not is_count(summary.get(key)):
            return f"'{key}' must be an integer >= 0, got {kind(summary.get(key))}"
    if not is_counts(summary.get("terminations")):
        return f"'terminations' must be an object of counts, got {kind(summary.get('terminations'))}"
    tools, ledger = summary.get("tools"), summary.get("ledger", [])
    if not isinstance(tools, dict):
        return f'\'tools\' must be an object of {{"calls": n, "errors": n}} per tool, got {kind(tools)}'
    for name, counts in tools.items():
        if not (isinstance(counts, dict) and is_count(counts.get("calls")) and is_count(counts.get("errors"))):
            return f'\'tools\'[{name!r}] must be {{"calls": n, "errors": n}}, got {kind(counts)}'
    if not isinstance(ledger, list):
        return f"'ledger' must be a list of endpoint summaries, got {kind(ledger)}"
    for i, window in enumerate(ledger):
        if not _window(window):
            return (
                f"'ledger'[{i}] must be an endpoint's summary: a role, {', '.join(COUNTS)} and latency_s {{p50, p99}}"
            )
    return None


def _window(window: Any) -> bool:
    """One endpoint's summary as the ledger writes it: the figures the audit sums."""
    latency = window.get("latency_s") if isinstance(window, dict) else None
    return (
        isinstance(latency, dict)
        and isinstance(window.get("role"), str)
        and all(is_count(window.get(k)) for k in COUNTS)
        and all(latency.get(p) is None or is_number(latency.get(p)) for p in ("p50", "p99"))
    )


@np.errstate(over="ignore", invalid="ignore")  # scores near the float limit: a figure is inf or nan (JSON: null)
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


@np.errstate(over="ignore", invalid="ignore")  # as step_figures
def reweigh(run: Run, weights: np.ndarray | None = None, normalize: bool = False) -> dict[str, int]:
    """What other weights (or GDPO's normalise-then-sum) would do to the logged groups: rankings that flip, and
    groups that gain or lose variance. A ranking flips when some pair of completions changes order."""
    new_w = run.weights if weights is None else weights
    counts = {"groups": 0, "rankings_flipped": 0, "pairs_flipped": 0, "gain_variance": 0, "lose_variance": 0}
    for step in run.steps:
        for group in step.groups(run.group_size):
            old = totals(group, run.weights)
            scored = gdpo_normalised(group) if normalize else group
            new = totals(scored, new_w)
            flips = _flipped_pairs(old, new)
            counts["groups"] += 1
            counts["pairs_flipped"] += flips
            counts["rankings_flipped"] += flips > 0
            was, now = bool(old.std() > TOL), bool(new.std() > TOL)
            counts["gain_variance"] += now and not was
            counts["lose_variance"] += was and not now
    return counts


@np.errstate(invalid="ignore", divide="ignore")  # a reward all None in a group: its term is 0
def gdpo_normalised(groups: np.ndarray) -> np.ndarray:
    """GDPO's first step as ms-swift computes it: each reward standardised within its group, (r - mean) / (sample
    std + 1e-8); a constant reward, a None and a group of one count 0. ``groups``: (size, rewards) for one group,
    or (groups, size, rewards)."""
    with warnings.catch_warnings():  # numpy warns of a reward with fewer than two scores in a group: it counts 0
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = np.nanstd(groups, axis=-2, ddof=1, keepdims=True) + GDPO_EPS
        mean = np.nanmean(groups, axis=-2, keepdims=True)
    return np.nan_to_num((groups - mean) / spread)


def _flipped_pairs(old: np.ndarray, new: np.ndarray) -> int:
    """Pairs (a, b) strictly ordered one way by ``old`` and strictly the other way, or tied, by ``new``, and the
    pairs tied by ``old`` that ``new`` orders: every change of the within-group ranking."""
    d_old = np.sign(np.round(old[:, None] - old[None, :], 9))
    d_new = np.sign(np.round(new[:, None] - new[None, :], 9))
    return int(np.triu(d_old != d_new, k=1).sum())

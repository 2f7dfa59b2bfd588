"""ThinkLength: S-curve reward on the length of the think text."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from scipy.special import expit

from rewardkit.config import ConfigError, config_section, setting
from rewardkit.rewards._base import CONTENT, THINK_ONLY, PlanningReward, known_gaps
from rewardkit.rewards._parsing import DatasetError, parse_all, where
from rewardkit.rewards._rows import RowCache, cells_key

STEEPNESS = 5.0  # the planner's constant in exp(5 * (x - 0.5))
BAND_ROWS = RowCache()  # (think_min, think_max) cells -> the checked band


def _s(x: float) -> float:
    # 1 / (1 + exp(5 (x - 0.5))), overflow-free for any length.
    return float(expit(-STEEPNESS * (x - 0.5)))


def reference_curve(length: float, lo: float, hi: float, eps: float) -> float:
    """The planner's original S-curve (``mode: reference``): 1 in [lo, hi], else ``1/(1+exp(5(|L-mid|/eps-0.5)))``."""
    if lo <= length <= hi:
        return 1.0
    return _s(abs(length - (lo + hi) / 2) / eps)


def smooth_curve(length: float, lo: float, hi: float, eps: float) -> float:
    """1 in [lo, hi]; outside, the same S measured from the nearer edge, scaled to 1 there.

    ``d = lo - L`` (too short) or ``L - hi`` (too long); reward ``S(d/eps) / S(0)``.
    With the default ``eps = hi - lo`` the reference curve is already 0.5 at the edge
    (``|L-mid|/eps = 0.5``), so it jumps from 1.0 to 0.5 at one character past
    the band; this variant starts at 1.0 and loses 0.46 over ``eps/2``.
    """
    if lo <= length <= hi:
        return 1.0
    distance = lo - length if length < lo else length - hi
    return min(1.0, _s(distance / eps) / _s(0.0))


CURVES = {"smooth": smooth_curve, "reference": reference_curve}  # think_length.mode -> its curve


def width(lo: float, hi: float, eps: float | None) -> float:
    """The S-curve's width: ``eps``, or ``max(hi - lo, 1)`` where the config leaves it null."""
    return eps if eps is not None else max(hi - lo, 1.0)


def _load_tokenizer(args: Any) -> Any:
    for attr in ("model", "model_dir", "model_name_or_path"):
        path = getattr(args, attr, None)
        if isinstance(path, str) and Path(path).is_dir():
            from transformers import AutoTokenizer

            return AutoTokenizer.from_pretrained(path, local_files_only=True)
    raise ConfigError(
        "think_length.unit: 'tokens' needs the training model's tokenizer, but args.model is not a local "
        "model directory; pass tokenizer=... or use unit: chars"
    )


@config_section("think_length")
@dataclass(frozen=True)
class ThinkLengthConfig:
    """The band of think lengths that scores 1.0, and the curve outside it."""

    unit: Literal["chars", "tokens"] = setting(
        "chars", "What L counts: characters, or tokens of the training model's tokenizer (from `args.model`)."
    )
    min: int = setting(50, "Shortest think that scores 1.0; a row's `think_min` cell overrides it.", minimum=0)
    max: int = setting(300, "Longest think that scores 1.0; a row's `think_max` cell overrides it.", minimum=0)
    eps: float | None = setting(None, "S-curve width; null = max(max - min, 1).", exclusive_minimum=0)
    mode: Literal["reference", "smooth"] = setting(
        "smooth",
        "`smooth` starts the S-curve at the band edge; `reference` is the planner's original curve, "
        "which jumps from 1.0 to 0.5 at the band edges.",
    )

    @staticmethod
    def check(raw: Mapping[str, Any]) -> tuple[str, str] | None:
        if raw.get("min", 0) > raw.get("max", float("inf")):
            return "min", f"min ({raw['min']}) must be <= think_length.max ({raw['max']})"
        return None


class ThinkLength(PlanningReward):
    r"""S-curve reward on L, the length of the stripped think text.

    Formula: ``mode: smooth`` (default) ``1`` if ``min <= L <= max`` else
    ``S(d/eps)/S(0)`` with ``d`` the distance to the nearer band edge;
    ``mode: reference`` (the planner's original curve) ``1`` inside, else ``S(|L - (min+max)/2| / eps)``;
    ``S(x) = 1/(1+exp(5(x-0.5)))``, ``eps`` defaults to ``max(max - min, 1)``.
    L counts characters (``unit: chars``) or tokenizer tokens (``unit: tokens``).
    Config: ``think_length`` (:class:`ThinkLengthConfig`, above).
    A missing or empty think scores 0.0 (the extreme of "too short").
    Columns: optional ``think_min`` / ``think_max`` override the band per row
    (null: the config's); each must be a finite number >= 0, with min <= max.
    Range: [0, 1]. Never returns None.

    Example (band 10-20 characters, so eps = 10 and the midpoint is 15)::

        >>> from rewardkit.rewards import ThinkLength
        >>> def think(n):
        ...     return "<think>\n" + "字" * n + "\n</think>\n\n<answer>\n{}\n</answer>"
        >>> band = {"min": 10, "max": 20}
        >>> smooth = ThinkLength(config={"think_length": band})
        >>> [round(r, 3) for r in smooth([think(15), think(25), "<answer>\n{}\n</answer>"])]  # 25: S(5/10) / S(0)
        [1.0, 0.541, 0.0]
        >>> reference = ThinkLength(config={"think_length": {**band, "mode": "reference"}})
        >>> [round(r, 3) for r in reference([think(20), think(21), think(25)])]  # 21: S(|21-15|/10) = S(0.6)
        [1.0, 0.378, 0.076]
    """

    section = ThinkLengthConfig
    order = 30
    sets = MappingProxyType({"planner": 0.1})

    may_return_none = False
    gameable = known_gaps(THINK_ONLY, "truncated", "repeated", "max_length", *CONTENT)

    optional_columns = ("think_min", "think_max")

    def __init__(self, args: Any = None, config: Any = None, tokenizer: Any = None, **kwargs: Any) -> None:
        super().__init__(args, config, **kwargs)
        self.cfg = self.config.section(ThinkLengthConfig)
        self.curve = CURVES[self.cfg.mode]
        self.tokenizer = None
        if self.cfg.unit == "tokens":
            self.tokenizer = tokenizer if tokenizer is not None else _load_tokenizer(args)

    def _lengths(self, thinks: Sequence[str]) -> list[int]:
        if self.tokenizer is None:
            return [len(t) for t in thinks]
        if not thinks:
            return []
        ids = self.tokenizer(list(thinks), add_special_tokens=False)["input_ids"]
        return [len(x) for x in ids]

    def _band(self, columns: Mapping[str, Any], i: int) -> tuple[float, float, float]:
        cells = (_cell(columns, "think_min", i), _cell(columns, "think_max", i))
        key = cells_key(self.cfg.min, self.cfg.max, self.cfg.eps, *cells)
        return BAND_ROWS.get(key, lambda: self._check_band(*cells, i))

    def _check_band(self, lo_cell: Any, hi_cell: Any, i: int) -> tuple[float, float, float]:
        lo = _number(lo_cell, "think_min", i, self.cfg.min)
        hi = _number(hi_cell, "think_max", i, self.cfg.max)
        if lo > hi:
            raise DatasetError(
                f"{where('think_min', i)}: {lo:g} is greater than think_max {hi:g} (a null cell takes "
                f"think_length.min/max from the config); fix the dataset row"
            )
        return lo, hi, width(lo, hi, self.cfg.eps)

    def score(self, completions: list[str], columns: Mapping[str, Any]) -> list[float | None]:
        if columns.get("think_min") is None and columns.get("think_max") is None:  # the config's band for all
            bands = [self._band(columns, 0)] * len(completions)
        else:
            bands = [self._band(columns, i) for i in range(len(completions))]  # every row, before any completion
        thinks = [c.think or "" for c in parse_all(completions)]
        present = [i for i, t in enumerate(thinks) if t]
        lengths = dict(zip(present, self._lengths([thinks[i] for i in present]), strict=True))
        rewards: list[float | None] = []
        for i in range(len(completions)):
            if i not in lengths:
                rewards.append(0.0)
                continue
            rewards.append(self.curve(lengths[i], *bands[i]))
        return rewards


def _cell(columns: Mapping[str, Any], name: str, i: int) -> Any:
    values = columns.get(name)
    return None if values is None else values[i]


def _number(cell: Any, name: str, i: int, default: float) -> float:
    """A band cell as a float; null means the config's value."""
    if cell is None:
        return float(default)
    try:
        value = float(cell) if not isinstance(cell, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise DatasetError(
            f"{where(name, i)}: {cell!r:.40} is not a finite number >= 0; fix the dataset row "
            f"(null takes think_length.{name.removeprefix('think_')} from the config)"
        )
    return value

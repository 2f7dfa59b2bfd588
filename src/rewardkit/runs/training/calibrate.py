"""Calibrating ``think_length`` on data: the think lengths of SFT or teacher rows, a band from their percentiles.

A row's think is the first ``<think>`` block of its answer: the ``output`` (teacher records), ``response`` or
``completion`` field, or else the last assistant message of ``messages`` (ms-swift SFT rows). Lengths are counted
as :class:`~rewardkit.rewards.think_length.ThinkLength` counts them: characters of the stripped think, or tokens
of a given tokenizer. The proposed band is ``[floor(P_low), ceil(P_high)]`` of the lengths (numpy's linear
percentiles), and each band is scored by the reward itself: the mean ThinkLength of the rows under it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.errors import UserError
from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.files.jsonl import read_jsonl
from rewardkit.rewards.answers import parse
from rewardkit.rewards.think_length import CURVES, ThinkLengthConfig, width

ANSWER_FIELDS = ("output", "response", "completion")


class CalibrationError(UserError, ValueError):
    """The data holds no think to measure, or the percentiles asked for are not a band."""


def answer_text(row: Mapping[str, Any]) -> str | None:
    """The row's answer: a teacher/response field, else its last assistant message; None when it has neither."""
    for name in ANSWER_FIELDS:
        if isinstance(row.get(name), str):
            return row[name]
    messages = row.get("messages")
    if isinstance(messages, list):
        said = [m.get("content") for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant"]
        if said and isinstance(said[-1], str):
            return said[-1]
    return None


def think_texts(path: Path) -> tuple[list[str], int]:
    """Every non-empty think of the file, and how many rows had none (no answer, or no think block)."""
    thinks, missing = [], 0
    for row in read_jsonl(path):
        text = answer_text(row) if isinstance(row, Mapping) else None
        think = parse(text).think if text is not None else None
        if think:
            thinks.append(think)
        else:
            missing += 1
    return thinks, missing


def lengths_of(thinks: Sequence[str], tokenizer: Any = None) -> list[int]:
    """Characters, or the tokenizer's tokens without special tokens (ThinkLength's ``unit: tokens``)."""
    if tokenizer is None:
        return [len(t) for t in thinks]
    return [len(ids) for ids in tokenizer(list(thinks), add_special_tokens=False)["input_ids"]] if thinks else []


@dataclass(frozen=True)
class Band:
    min: int
    max: int
    eps: float | None  # the config's; None: max(max - min, 1)

    def reward(self, length: float, mode: str) -> float:
        """ThinkLength's score of ``length`` under this band (``mode``: the config's curve)."""
        return CURVES[mode](length, self.min, self.max, width(self.min, self.max, self.eps))

    def score(self, lengths: Sequence[int], mode: str) -> float:
        """The mean ThinkLength of ``lengths`` under this band."""
        return float(np.mean([self.reward(n, mode) for n in lengths]))

    def inside(self, lengths: Sequence[int]) -> float:
        return float(np.mean([self.min <= n <= self.max for n in lengths]))


@dataclass(frozen=True)
class Calibration:
    unit: str
    lengths: list[int]
    missing: int  # rows without a think
    low: float  # the percentiles asked for
    high: float
    current: Band
    proposed: Band
    mode: str

    def as_dict(self) -> dict[str, Any]:
        n = np.asarray(self.lengths)
        return {
            "unit": self.unit,
            "rows": len(self.lengths) + self.missing,
            "without_think": self.missing,
            "length": {"mean": float(n.mean()), "p50": float(np.median(n)), "min": int(n.min()), "max": int(n.max())},
            "percentiles": [self.low, self.high],
            "current": self._band(self.current),
            "proposed": self._band(self.proposed),
        }

    def _band(self, band: Band) -> dict[str, Any]:
        scored = {"inside": band.inside(self.lengths), "mean_reward": band.score(self.lengths, self.mode)}
        return {"min": band.min, "max": band.max, **scored}

    def _band(self, band: Band) -> dict[str, Any]:
        scored = {"inside": band.inside(self.lengths), "mean_reward": band.score(self.lengths, self.mode)}
        return {"min": band.min, "max": band.max, **scored}

    def yaml(self) -> str:
        """The ``think_length`` section to paste into the config file."""
        return f"think_length:\n  unit: {self.unit}\n  min: {self.proposed.min}\n  max: {self.proposed.max}\n"


def calibrate(
    path: Path, cfg: ThinkLengthConfig, low: float = 10.0, high: float = 90.0, tokenizer: Any = None
) -> Calibration:
    """Measure the file's thinks and propose ``[floor(P_low), ceil(P_high)]``."""
    if not 0 <= low < high <= 100:
        raise CalibrationError(f"percentiles {low:g} and {high:g}: need 0 <= --low < --high <= 100")
    thinks, missing = think_texts(path)
    if not thinks:
        raise CalibrationError(
            f"{path}: no row has a <think> block in {', '.join(ANSWER_FIELDS)} or its last assistant message"
        )
    lengths = lengths_of(thinks, tokenizer)
    lo, hi = np.percentile(lengths, [low, high])
    return Calibration(
        unit="tokens" if tokenizer is not None else "chars",
        lengths=lengths,
        missing=missing,
        low=low,
        high=high,
        current=Band(cfg.min, cfg.max, cfg.eps),
        proposed=Band(math.floor(lo), math.ceil(hi), cfg.eps),
        mode=cfg.mode,
    )


def plot(result: Calibration, out: Path) -> Path:
    """The length histogram under the reward's S-curve for the current band (shaded) and the proposed one."""
    fig, hist = pyplot().subplots(figsize=(8, 4.5))
    hist.hist(result.lengths, bins=min(40, max(5, len(set(result.lengths)))), color="#9bb7d4", label="think lengths")
    hist.set_xlabel(f"think length ({result.unit})")
    hist.set_ylabel("rows")
    curve = hist.twinx()
    xs = np.linspace(0, max(max(result.lengths), result.current.max, result.proposed.max) * 1.3, 400)
    for band, style, name in ((result.current, "-", "current"), (result.proposed, "--", "proposed")):
        ys = [band.reward(x, result.mode) for x in xs]
        curve.plot(xs, ys, style, color="#c0392b", label=f"ThinkLength, {name} band [{band.min}, {band.max}]")
    curve.axvspan(result.current.min, result.current.max, color="#c0392b", alpha=0.08)
    curve.set_ylim(0, 1.05)
    curve.set_ylabel("reward")
    curve.legend(loc="upper right", fontsize=8)
    hist.set_title(f"think_length calibration: {len(result.lengths)} thinks, P{result.low:g}-P{result.high:g}")
    return write_png(png(fig, "the calibration plot"), out, "--plot")

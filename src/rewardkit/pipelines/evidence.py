"""What both chains report about their GRPO runs: figures per kind of model over the seeds, the sign test,
and the bar chart of base, SFT, GRPO, control (and inverted) with the seed spread.

A *model* is one trained network (``grpo_s2``); its *kind* is what it is an instance of (``grpo``). Base and
SFT are one model each; every GRPO kind has one model per seed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.pipelines.chain import GrpoRun
from rewardkit.runs.stats.paired import paired_items, spread

KINDS = ("base", "sft", "grpo", "control", "inverted")
LABELS = {"base": "base", "sft": "SFT", "grpo": "GRPO", "control": "control (lr 1e-12)", "inverted": "inverted reward"}
FLAT = 1e-9  # a difference this small has no direction


def model_kinds(runs: Sequence[GrpoRun]) -> dict[str, str]:
    """Model name -> kind, base and SFT first, then the GRPO runs in stage order."""
    return {"base": "base", "sft": "sft", **{run.stage: run.kind for run in runs}}


def per_kind(values: Mapping[str, float | None], kinds: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """{kind: spread over its models' values}, for the kinds that have a model in ``values``."""
    out = {}
    for kind in KINDS:
        models = [m for m, k in kinds.items() if k == kind and m in values]
        if models:
            out[kind] = {**spread([values[m] for m in models]), "models": models}
    return out


# The comparisons every summary makes, (B, A): B against A, when both kinds ran.
PAIRS = (("sft", "base"), ("grpo", "sft"), ("grpo", "control"), ("inverted", "control"))


def paired_by_kind(
    kinds: Mapping[str, str], per_item: Mapping[tuple[str, str], Mapping[str, float]], cells: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """{"grpo_vs_control": {cell: paired_items(...)}, ...}: each pair of :data:`PAIRS` whose kinds both ran,
    per cell (``greedy_train``, ...); ``per_item[model, cell]`` holds one model's {item: value}."""
    by_kind = {k: [m for m, kind in kinds.items() if kind == k] for k in KINDS}
    return {
        f"{b}_vs_{a}": {
            cell: paired_items([per_item[m, cell] for m in by_kind[a]], [per_item[m, cell] for m in by_kind[b]])
            for cell in cells
        }
        for b, a in PAIRS
        if by_kind[a] and by_kind[b]
    }


def sign_test_of(paired: Mapping[str, Mapping[str, Any]], cell: str, metric: str) -> dict[str, Any] | None:
    """The sign test on ``cell`` when the chain ran the inverted reward, else None."""
    if "inverted_vs_control" not in paired:
        return None
    return sign_test(paired["grpo_vs_control"][cell], paired["inverted_vs_control"][cell], metric)


def direction(diff: float) -> str:
    return "up" if diff > FLAT else "down" if diff < -FLAT else "flat"


def sign_test(grpo: Mapping[str, Any], inverted: Mapping[str, Any], metric: str) -> dict[str, Any]:
    """The normal run against the control and the inverted run against the control, on one metric (two
    :func:`rewardkit.runs.stats.paired.paired_items` results). The gradient path is right when the normal run
    moves the metric up and the inverted run moves it down; both the same way means it is broken."""
    keep = ("diff", "ci", "items", "up", "down")
    moves = {"grpo": direction(grpo["diff"]), "inverted": direction(inverted["diff"])}
    return {
        "metric": metric,
        "grpo_minus_control": {k: grpo[k] for k in keep},
        "inverted_minus_control": {k: inverted[k] for k in keep},
        "directions": moves,
        "opposite": moves == {"grpo": "up", "inverted": "down"},
        "both_intervals_exclude_zero": grpo["ci"][0] > 0 and inverted["ci"][1] < 0,
    }


def bar_chart(figures: Mapping[str, Mapping[str, Mapping[str, Any]]], ylabel: str, title: str, out: Path) -> Path:
    """Bars per kind and split (``figures``: {split: {kind: spread}}), the mean over seeds with error bars of
    one standard deviation, each seed's value as a dot."""
    plt = pyplot()
    splits = list(figures)
    kinds = [k for k in KINDS if any(k in figures[s] for s in splits)]
    width = 0.8 / max(1, len(splits))
    fig, ax = plt.subplots(figsize=(1.6 * len(kinds) + 2.5, 4.2))
    for i, split in enumerate(splits):
        xs = [x + (i - (len(splits) - 1) / 2) * width for x in range(len(kinds))]
        cells = [figures[split].get(k) or {} for k in kinds]
        means = [c.get("mean") or 0.0 for c in cells]
        bars = ax.bar(xs, means, width, yerr=[c.get("sd") or 0.0 for c in cells], capsize=3, label=split)
        ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
        for x, c in zip(xs, cells, strict=True):
            ax.plot([x] * len(c.get("values", [])), c.get("values", []), "k.", markersize=3)
    ax.set_xticks(range(len(kinds)), [LABELS[k] for k in kinds], fontsize=8)
    ax.set(ylabel=ylabel, ylim=(0, 1.05), title=title)
    ax.legend(fontsize=8)
    return write_png(png(fig, "the bar chart"), out)

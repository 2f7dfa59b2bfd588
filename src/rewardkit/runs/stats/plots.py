"""Figures of an agent evaluation (``metrics.summarize_episodes``) and of a run comparison (``metrics.compare``).

``render_eval`` and ``render_compare`` return the PNG's bytes, so a caller can draw before it replaces any output
and commit the figure with its other outputs (``OutputSet.write_bytes``); ``plot_eval`` and ``plot_compare`` draw
and write one file. Both go through :mod:`rewardkit.files.figures`: a figure that cannot be drawn (a ``--title``
with bad ``$...$`` math) raises ``PlotError`` before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.runs.stats.metrics import TaskStats


def plot_eval(
    summary: Mapping[str, Any],
    tasks: Sequence[TaskStats],
    png_path: str | Path,
    title: str = "agent evaluation",
    flag: str = "output",
) -> Path:
    """``render_eval`` written to ``png_path``."""
    return write_png(render_eval(summary, tasks, title, flag), png_path, flag)


def render_eval(
    summary: Mapping[str, Any], tasks: Sequence[TaskStats], title: str = "agent evaluation", flag: str = "output"
) -> bytes:
    """pass^k against k, the per-task success rates, termination reasons, and calls per tool, as PNG bytes."""
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    ks = [e for e in summary["pass_hat_k"] if e["value"] is not None]
    ax = axes[0][0]
    ax.plot([e["k"] for e in ks], [e["value"] for e in ks], marker="o", color="tab:blue")
    for e in ks:
        ax.annotate(
            f"{e['value']:.3f}\n({e['tasks']} tasks)",
            (e["k"], e["value"]),
            fontsize=7,
            textcoords="offset points",
            xytext=(0, 6),
            ha="center",
        )
    ax.set(xlabel="k", ylabel="pass^k", ylim=(-0.02, 1.08), title="pass^k (mean over tasks with >= k trials)")
    ax.set_xticks([e["k"] for e in ks] or [1])
    ax.margins(x=0.1)  # room for the labels of the first and last k
    rates = [s.pass1 for s in tasks if s.pass1 is not None]
    axes[0][1].hist(rates, bins=np.linspace(0, 1, 11), color="tab:green", edgecolor="white")
    axes[0][1].set(xlabel="pass^1 of the task", ylabel="tasks", title=f"per-task success rate ({len(rates)} tasks)")
    _barh(axes[1][0], dict(summary["termination"]), "episodes", "termination (infra errors included)", "tab:orange")
    calls = {name: row["calls"] for name, row in summary["tools"].items()}
    _barh(axes[1][1], calls, "calls", "tool calls (valid episodes)", "tab:purple")
    episodes = summary["episodes"]
    fig.suptitle(f"{title}: {episodes['valid']} valid episodes, {episodes['infra_error']} infra errors excluded")
    return png(fig, f"{flag} (title {title!r})")


def _plain(text: str) -> str:
    """A label from a run's data (a tool name a model made up) drawn as written: a ``$`` is no math, and a lone
    surrogate, which matplotlib cannot take, is shown as its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("$", r"\$")


def _barh(ax: Any, counts: Mapping[str, float], xlabel: str, title: str, color: str, top: int = 20) -> None:
    items = sorted(counts.items(), key=lambda kv: -kv[1])[:top][::-1]  # largest at the top of the axis
    ax.barh([_plain(k) for k, _ in items], [v for _, v in items], color=color)
    ax.tick_params(axis="y", labelsize=7)
    ax.set(xlabel=xlabel, title=title if len(counts) <= top else f"{title}, top {top} of {len(counts)}")


def plot_compare(
    result: Mapping[str, Any],
    png_path: str | Path,
    title: str = "B against A",
    labels: tuple[str, str] = ("A", "B"),
    flag: str = "output",
) -> Path:
    """``render_compare`` written to ``png_path``."""
    return write_png(render_compare(result, title, labels, flag), png_path, flag)


def render_compare(
    result: Mapping[str, Any], title: str = "B against A", labels: tuple[str, str] = ("A", "B"), flag: str = "output"
) -> bytes:
    """Per-task pass^1 of B against A (marker area = tasks at that point), and the mean diff with its interval."""
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    points = np.array([[row["a"], row["b"]] for row in result["per_task"]], dtype=float)
    where, counts = np.unique(points, axis=0, return_counts=True)  # single-trial runs pile up on four corners
    left.scatter(where[:, 0], where[:, 1], s=30 * counts, alpha=0.6, color="tab:blue")
    for (x, y), n in zip(where, counts, strict=True):
        if n > 1:
            left.annotate(str(n), (x, y), fontsize=7, ha="center", va="center")
    left.plot([0, 1], [0, 1], color="grey", linewidth=0.8, linestyle="--")
    left.set(
        xlabel=f"pass^1 {labels[0]}",
        ylabel=f"pass^1 {labels[1]}",
        xlim=(-0.05, 1.05),
        ylim=(-0.05, 1.05),
        title=f"{result['paired_tasks']} paired tasks: {len(result['improved'])} up, {len(result['regressed'])} down",
    )
    low, high = result["ci"]
    diff = result["diff"]
    right.errorbar([0], [diff], yerr=[[diff - low], [high - diff]], fmt="o", capsize=8, color="tab:red")
    right.axhline(0, color="grey", linewidth=0.8)
    span = max(high, 0) - min(low, 0)
    right.set_ylim(min(low, 0) - 0.1 * span - 0.01, max(high, 0) + 0.1 * span + 0.01)  # zero always in view
    right.set_xticks([0], [f"{labels[1]} - {labels[0]}"])
    right.set(
        ylabel="mean pass^1 difference",
        xlim=(-1, 1),
        title=f"{diff:+.3f}, {result['confidence']:.0%} CI [{low:+.3f}, {high:+.3f}]",
    )
    fig.suptitle(title)
    return png(fig, f"{flag} (title {title!r}, labels {labels[0]!r}, {labels[1]!r})")

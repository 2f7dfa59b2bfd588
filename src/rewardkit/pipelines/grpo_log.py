"""Read ms-swift GRPO logs into per-reward curves, a summary.json and a PNG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.files.jsonl import read_jsonl
from rewardkit.rewards.answers import parse

REWARD_PREFIX = "rewards/"


def grpo_steps(logging_jsonl: Path) -> list[dict[str, Any]]:
    """One dict per logged training step (the trailing summary lines are skipped).

    A torn or non-JSON line raises ``JsonlError`` naming ``file:line``, not a bare JSONDecodeError.
    """
    rows = read_jsonl(logging_jsonl)
    return [r for r in rows if "reward" in r and "global_step/max_steps" in r]


def reward_means(row: Mapping[str, Any]) -> dict[str, float]:
    """``{"StrictFormat": 0.9, ...}`` from one logging row."""
    return {
        k[len(REWARD_PREFIX) : -len("/mean")]: float(v)
        for k, v in row.items()
        if k.startswith(REWARD_PREFIX) and k.endswith("/mean")
    }


def think_lengths(completions_jsonl: Path) -> dict[int, float]:
    """Mean think length (characters) per step from ms-swift's completions.jsonl."""
    per_step: dict[int, list[int]] = {}
    if not completions_jsonl.is_file():
        return {}
    for table in read_jsonl(completions_jsonl):
        steps, texts = table.get("step"), table.get("completion")
        if not isinstance(texts, list):
            steps, texts = [steps], [texts]
        for step, text in zip(steps, texts, strict=True):
            per_step.setdefault(int(step), []).append(len(parse(str(text)).think or ""))
    return {s: sum(v) / len(v) for s, v in sorted(per_step.items())}


def _step(row: Mapping[str, Any]) -> int:
    return int(str(row["global_step/max_steps"]).split("/")[0])


def _window_mean(rows: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    out = {"reward": sum(float(r["reward"]) for r in rows) / len(rows)}
    for name in reward_means(rows[0]):
        out[name] = sum(reward_means(r)[name] for r in rows) / len(rows)
    return out


def summarize_steps(steps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """First and last logged steps, means over the first and last quarter of the run, and per logged step
    the share of groups whose rewards had no variance (no gradient: ms-swift's ``frac_reward_zero_std``).

    A logged step averages only a few prompts' groups, so single points are
    noisy; the quarter windows are what "the reward went up" should rest on.
    """
    if not steps:
        raise ValueError("no GRPO logging steps with rewards to summarize_steps")
    k = max(1, len(steps) // 4)
    return {
        "steps": [_step(steps[0]), _step(steps[-1])],
        "first": {"reward": steps[0]["reward"], **reward_means(steps[0])},
        "last": {"reward": steps[-1]["reward"], **reward_means(steps[-1])},
        "first_quarter": _window_mean(steps[:k]),
        "last_quarter": _window_mean(steps[-k:]),
        "zero_std_share": [s.get("frac_reward_zero_std") for s in steps],
    }


def plot(
    steps: Sequence[Mapping[str, Any]],
    thinks: Mapping[int, float],
    out: Path,
    title: str,
    think_band: tuple[float, float] | None = None,
) -> Path:
    """The rewards' curves (full names) and the weighted total; the mean think length per step, with the
    band that ThinkLength scores 1.0 shaded."""
    plt = pyplot()
    xs = [_step(r) for r in steps]
    names = list(reward_means(steps[0]))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    for name in names:
        axes[0].plot(xs, [reward_means(r).get(name) for r in steps], label=name, linewidth=1.2)
    axes[0].plot(xs, [r["reward"] for r in steps], label="weighted total", color="black", linewidth=2.2)
    axes[0].set(xlabel="GRPO step", ylabel="mean reward", ylim=(-0.02, 1.02), title="rewards")
    axes[0].legend(fontsize=7, loc="lower right")
    if thinks:
        axes[1].plot(list(thinks), list(thinks.values()), color="tab:purple", label="mean think length")
    if think_band:
        axes[1].axhspan(*think_band, color="tab:green", alpha=0.15, label="ThinkLength band (scores 1.0)")
        axes[1].legend(fontsize=7)
    axes[1].set(xlabel="GRPO step", ylabel="characters", title="think length")
    fig.suptitle(title)
    return write_png(png(fig, "the GRPO curves"), out)

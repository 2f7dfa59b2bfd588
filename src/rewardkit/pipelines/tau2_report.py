"""The tau2 chain's summary: each model on the training tasks and the held-out split, GRPO's curves, a PNG."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.files.jsonl import read_jsonl
from rewardkit.files.outputs import atomic_write_text
from rewardkit.pipelines.stages import Context
from rewardkit.runs.metrics import compare, episodes, task_order

BAD_CALLS = ("SCHEMA_VIOLATION", "UNKNOWN_TOOL")  # a call the harness could not even run
SPLITS = ("train", "test")  # the training tasks and the held-out split


def _valid_calls(record: Mapping[str, Any]) -> int:
    return sum(n for code, n in record.get("call_codes", {}).items() if code not in BAD_CALLS)


def model_metrics(eval_dir: Path, records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """pass^k, TCR, turns, and how many tool calls were well-formed calls of a real tool (``records``: the
    run's episodes)."""
    summary = json.loads((eval_dir / "summary.json").read_text(encoding="utf-8"))
    valid = [r for r in records if r["status"] == "ok"]
    return {
        "pass_hat_k": {str(p["k"]): p["value"] for p in summary["pass_hat_k"]},
        "tcr": summary["mean"]["tcr"],
        "turns": summary["mean"]["turns"],
        "tool_calls": sum(sum(r.get("call_codes", {}).values()) for r in valid),
        "valid_tool_calls": sum(_valid_calls(r) for r in valid),
        "episodes_with_a_valid_call": sum(_valid_calls(r) > 0 for r in valid),
        "episodes": summary["episodes"],
        "termination": summary["termination"],
        "completed_tasks": sorted({r["task_id"] for r in valid if r["reward"] == 1.0}, key=task_order),
    }


def _grpo_curve(run_dir: Path) -> dict[str, Any]:
    from rewardkit.pipelines.grpo_log import grpo_steps, reward_means, summarize_steps

    steps = grpo_steps(run_dir / "logging.jsonl")
    return {
        **summarize_steps(steps),
        "task_completion": [reward_means(s).get("TaskCompletion") for s in steps],
    }


def _paired(a: Sequence[dict[str, Any]], b: Sequence[dict[str, Any]]) -> dict[str, Any]:
    result = compare(a, b, n_boot=10_000, seed=0)
    keep = ("paired_tasks", "diff", "ci", "share_boot_positive", "improved", "regressed")
    return {k: result[k] for k in keep}


def write_summary(ctx: Context, preset: str, models: Sequence[str]) -> Path:
    data = ctx.results["data"]
    report = json.loads((Path(data["dir"]) / "synth_report.json").read_text(encoding="utf-8"))
    dirs = {(m, split): Path(ctx.results[f"eval_{m}"][split]) for m in models for split in SPLITS}
    runs = {key: episodes(read_jsonl(d / "episodes.jsonl")) for key, d in dirs.items()}  # each log read once
    summary: dict[str, Any] = {
        "preset": preset,
        "train_tasks": data["tasks"],
        "synthesis": {k: report[k] for k in ("read", "kept", "rejected", "terminations")},
        "models": {m: {split: model_metrics(dirs[m, split], runs[m, split]) for split in SPLITS} for m in models},
        "grpo": {s: _grpo_curve(Path(ctx.results[s]["run_dir"])) for s in ("grpo", "grpo_control") if s in models},
        "paired": {
            f"{b}_vs_{a}_{split}": _paired(runs[a, split], runs[b, split])
            for a, b in (("base", "sft"), ("sft", "grpo"), ("grpo_control", "grpo"))
            if b in models and a in models
            for split in SPLITS
        },
    }
    summary["plot"] = str(plot(summary, ctx.workdir / "tau2.png"))
    path = ctx.workdir / "summary.json"
    atomic_write_text(path, json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return path


def plot(summary: Mapping[str, Any], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(summary["models"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    width = 0.38
    for i, split in enumerate(("train", "test")):
        values = [summary["models"][m][split]["pass_hat_k"]["1"] or 0.0 for m in models]
        xs = [x + (i - 0.5) * width for x in range(len(models))]
        bars = axes[0].bar(xs, values, width, label=f"{split} tasks")
        axes[0].bar_label(bars, fmt="%.2f", fontsize=8)
    axes[0].set_xticks(range(len(models)), models)
    axes[0].set(ylabel="pass^1", ylim=(0, 1.05), title="task completion, greedy")
    axes[0].legend(fontsize=8)
    for stage, curve in summary["grpo"].items():
        axes[1].plot(range(1, len(curve["task_completion"]) + 1), curve["task_completion"], label=stage)
    axes[1].set(xlabel="GRPO step", ylabel="mean TaskCompletion of the rollouts", ylim=(-0.02, 1.02),
                title="multi-turn GRPO rollouts")  # fmt: skip
    axes[1].legend(fontsize=8)
    fig.suptitle(f"tau2 retail, {summary['preset']} preset: cold start then GRPO")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out

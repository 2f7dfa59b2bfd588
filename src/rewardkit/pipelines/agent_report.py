"""The agent chain's summary: each model on the training tasks and the held-out split, greedy and sampled; each
kind's pass^1 over the seeds; GRPO against its control paired by task; the sign test; GRPO's curves; PNGs."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.files.figures import png, pyplot, write_png
from rewardkit.files.jsonl import dumps, read_jsonl
from rewardkit.files.outputs import atomic_write_text
from rewardkit.pipelines import evidence
from rewardkit.pipelines.stages import Context
from rewardkit.runs.stats.metrics import episodes, task_order, task_stats

BAD_CALLS = ("SCHEMA_VIOLATION", "UNKNOWN_TOOL")  # a call the harness could not even run
SPLITS = ("train", "test")  # the training tasks and the held-out split
MODES = ("greedy", "sampled")  # one trial at temperature 0; the preset's trials sampled as GRPO's rollouts


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


GRPO_CELL = "sampled_grpo"  # the sampled training episodes of the tasks GRPO trained on (the select stage's)


def _per_task(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    return {t.task_id: t.pass1 for t in task_stats(records) if t.trials}


def write_summary(ctx: Context, preset: str, domain: str, kinds: Mapping[str, str]) -> Path:
    """``WORKDIR/summary.json`` and its plots; ``domain`` (the domain's name) titles them."""
    data = ctx.results["data"]
    report = json.loads((Path(data["dir"]) / "synth_report.json").read_text(encoding="utf-8"))
    cells = [(m, f"{mode}_{split}") for m in kinds for mode in MODES for split in SPLITS]
    dirs = {(m, cell): Path(ctx.results[f"eval_{m}"][cell]) for m, cell in cells}
    runs = {key: episodes(read_jsonl(d / "episodes.jsonl")) for key, d in dirs.items()}  # each log read once
    models = {
        m: {
            "kind": k,
            **({"seed": ctx.results[m]["seed"]} if k not in ("base", "sft") else {}),
            **{cell: model_metrics(dirs[m, cell], runs[m, cell]) for mm, cell in cells if mm == m},
        }
        for m, k in kinds.items()
    }
    per_task = {key: _per_task(records) for key, records in runs.items()}
    pairs = list(dict.fromkeys(c for _, c in cells))
    trained = ctx.results["select"]["tasks"] if "select" in ctx.results else None
    if trained is not None and set(trained) & set(per_task[next(iter(kinds)), "sampled_train"]):
        pairs.append(GRPO_CELL)  # GRPO trained on some training tasks only: its own figure, beside all of them
        for m in kinds:
            per_task[m, GRPO_CELL] = {t: v for t, v in per_task[m, "sampled_train"].items() if t in trained}
    pass1 = {
        mode: {
            split: evidence.per_kind({m: models[m][f"{mode}_{split}"]["pass_hat_k"]["1"] for m in kinds}, kinds)
            for split in SPLITS
        }
        for mode in MODES
    }
    summary: dict[str, Any] = {
        "preset": preset,
        "domain": domain,
        "seeds": sum(k == "grpo" for k in kinds.values()),
        "train_tasks": data["tasks"],
        "synthesis": {k: report[k] for k in ("read", "kept", "rejected", "terminations")},
        "models": models,
        "pass1": pass1,
        "grpo": {m: _grpo_curve(Path(ctx.results[m]["run_dir"])) for m, k in kinds.items() if k not in ("base", "sft")},
        "grpo_tasks": trained,
        "paired": evidence.paired_by_kind(kinds, per_task, pairs),
    }
    cell, what = (GRPO_CELL, "GRPO's tasks") if GRPO_CELL in pairs else ("sampled_train", "training tasks")
    summary["sign_test"] = evidence.sign_test_of(summary["paired"], cell, f"pass^1, sampled, {what}")
    summary["plot"] = str(plot(summary, ctx.workdir / "agent.png"))
    title = f"{domain}, {preset} preset: each model, sampled"
    summary["bars"] = str(
        evidence.bar_chart(pass1["sampled"], "pass^1 (sampled, mean over seeds)", title, ctx.workdir / "agent_bars.png")
    )
    path = ctx.workdir / "summary.json"
    atomic_write_text(path, dumps(summary, indent=2) + "\n")
    return path


def plot(summary: Mapping[str, Any], out: Path) -> Path:
    plt = pyplot()
    models = list(summary["models"])
    fig, axes = plt.subplots(1, 2, figsize=(max(12, 1.1 * len(models) + 6), 4.2))
    width = 0.2
    for i, cell in enumerate(f"{mode}_{split}" for mode in MODES for split in SPLITS):
        values = [summary["models"][m][cell]["pass_hat_k"]["1"] or 0.0 for m in models]
        xs = [x + (i - 1.5) * width for x in range(len(models))]
        axes[0].bar(xs, values, width, label=cell.replace("_", ", ") + " tasks")
    axes[0].set_xticks(range(len(models)), models, fontsize=7, rotation=20)
    axes[0].set(ylabel="pass^1", ylim=(0, 1.05), title="task completion per model")
    axes[0].legend(fontsize=8)
    for stage, curve in summary["grpo"].items():
        axes[1].plot(range(1, len(curve["task_completion"]) + 1), curve["task_completion"], label=stage)
    axes[1].set(
        xlabel="GRPO step",
        ylabel="mean TaskCompletion of the rollouts",
        ylim=(-0.02, 1.02),
        title="multi-turn GRPO rollouts",
    )
    axes[1].legend(fontsize=8)
    fig.suptitle(f"{summary['domain']}, {summary['preset']} preset: cold start then GRPO")
    return write_png(png(fig, "the agent chain's summary figure"), out)

"""Agent evaluation on a tau2 domain: K trials per task through the shared loop, then tau-bench's metrics.

Writes into one directory: ``episodes.jsonl`` (the resumable log, one record per episode),
``tasks.jsonl`` and ``tasks.csv`` (one row per task), ``summary.json`` (pass^k for k = 1..K,
means, termination reasons, tool use, what was excluded) and ``eval.png``. Episodes that ended
in an infrastructure error are excluded from every metric and counted, as tau2-bench does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.files.outputs import atomic_write_text
from rewardkit.runs.episode_log import EpisodeLog, TrialPlan, run_trials
from rewardkit.runs.metrics import summarize_episodes, task_stats, write_task_table
from rewardkit.runs.spec import RunSpec, build_plan

FILES = ("episodes.jsonl", "tasks.jsonl", "tasks.csv", "summary.json", "eval.png")


def evaluate(
    plan: TrialPlan, log: EpisodeLog, out_dir: Path, meta: Mapping[str, Any], progress: bool = True,
    title: str = "agent evaluation",
) -> dict[str, Any]:  # fmt: skip
    """Run the plan's missing episodes, then write the tables, the summary and the plot."""
    from rewardkit.runs.plots import plot_eval

    records = run_trials(plan, log, progress=progress, label="evaluation")
    stats = task_stats(records)
    summary = {**meta, **summarize_episodes(records, plan.trials)}
    write_task_table(stats, out_dir / "tasks.jsonl", out_dir / "tasks.csv")
    plot_eval(summary, stats, out_dir / "eval.png", title)
    atomic_write_text(out_dir / "summary.json", json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return summary


def evaluate_run(
    spec: RunSpec, out_dir: Path, resume: bool = False, progress: bool = True, title: str | None = None
) -> dict[str, Any]:
    """The whole of ``eval tau2`` after its options are checked: plan the spec, continue (``resume``) or
    start ``OUT_DIR/episodes.jsonl``, run, write the tables, the summary and the plot (titled the agent)."""
    plan, meta = build_plan(spec)
    log = EpisodeLog(out_dir / "episodes.jsonl", meta["run"], resume)
    return evaluate(plan, log, out_dir, meta, progress=progress, title=title or spec.agent)


def headline(summary: Mapping[str, Any]) -> str:
    """One line: pass^k, TCR, turns and what was excluded."""
    passes = "  ".join(
        f"pass^{p['k']} {p['value']:.3f}" if p["value"] is not None else f"pass^{p['k']} -"
        for p in summary["pass_hat_k"]
    )
    mean = summary["mean"]
    tcr = "-" if mean["tcr"] is None else f"{mean['tcr']:.3f}"
    turns = "-" if mean["turns"] is None else f"{mean['turns']:.1f}"
    episodes = summary["episodes"]
    return (
        f"{passes}  TCR {tcr}  turns {turns}  episodes {episodes['valid']} valid, "
        f"{episodes['infra_error']} infrastructure errors excluded"
    )

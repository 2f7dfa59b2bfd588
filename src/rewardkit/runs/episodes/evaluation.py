"""Agent evaluation on a domain: K trials per task through the shared loop, then tau-bench's metrics.

Writes into one directory: ``episodes.jsonl`` (the resumable log, one record per episode),
``tasks.jsonl`` and ``tasks.csv`` (one row per task), ``summary.json`` (pass^k for k = 1..K,
means, termination reasons, tool use, what was excluded) and ``eval.png``. Episodes that ended
in an infrastructure error are excluded from every metric and counted, as tau2-bench does.

The four reports land together or not at all: the plot is drawn in memory first, then every file is staged
beside its target and renamed into place in one ``OutputSet``, so a failure (a ``--title`` matplotlib cannot
draw, a full disk) leaves the previous run's reports as they were. The episode log is held by this run alone
from start to end (``EpisodeLog``'s lock).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputSet
from rewardkit.runs.episodes.episode_log import EpisodeLog
from rewardkit.runs.episodes.spec import RunSpec, build_plan
from rewardkit.runs.episodes.trials import TrialPlan, run_trials
from rewardkit.runs.stats.metrics import summarize_episodes, task_stats
from rewardkit.runs.stats.tables import write_task_table

FILES = ("episodes.jsonl", "tasks.jsonl", "tasks.csv", "summary.json", "eval.png")


def evaluate(
    plan: TrialPlan,
    log: EpisodeLog,
    out_dir: Path,
    meta: Mapping[str, Any],
    progress: bool = True,
    title: str = "agent evaluation",
) -> dict[str, Any]:
    """Run the plan's missing episodes, then write the tables, the summary and the plot, all or none."""
    from rewardkit.runs.stats.plots import render_eval

    records = run_trials(plan, log, progress=progress, label="evaluation")
    stats = task_stats(records)
    summary = {**meta, **summarize_episodes(records, plan.trials), "ledger": plan.ledger()}
    text = dumps(summary, indent=2, allow_nan=False) + "\n"  # NaN here is a bug
    png = render_eval(summary, stats, title, str(out_dir / "eval.png"))  # before any output is replaced
    with OutputSet() as outputs:
        write_task_table(stats, out_dir / "tasks.jsonl", out_dir / "tasks.csv", outputs=outputs)
        outputs.write_text(out_dir / "summary.json", text, "--out-dir")
        outputs.write_bytes(out_dir / "eval.png", png, "--out-dir")
    return summary


def evaluate_run(
    spec: RunSpec, out_dir: Path, resume: bool = False, progress: bool = True, title: str | None = None
) -> dict[str, Any]:
    """The whole of ``eval agent`` after its options are checked: plan the spec, continue (``resume``) or
    start ``OUT_DIR/episodes.jsonl``, run, write the tables, the summary and the plot (titled the agent and the
    domain unless ``title`` is given)."""
    plan, meta = build_plan(spec)
    with EpisodeLog(out_dir / "episodes.jsonl", meta["run"], resume, choose="another --out-dir") as log:
        return evaluate(plan, log, out_dir, meta, progress=progress, title=title or f"{spec.agent} on {meta['domain']}")


def headline(summary: Mapping[str, Any]) -> str:
    """One line: pass^k, TCR, turns, the share of calls that succeeded, the gates (when any was met), what was
    excluded, and the episodes whose simulated user the review flagged with pass^1 without them (when any was)."""
    passes = "  ".join(
        f"pass^{p['k']} {p['value']:.3f}" if p["value"] is not None else f"pass^{p['k']} -"
        for p in summary["pass_hat_k"]
    )
    mean = summary["mean"]
    tcr = "-" if mean["tcr"] is None else f"{mean['tcr']:.3f}"
    turns = "-" if mean["turns"] is None else f"{mean['turns']:.1f}"
    episodes = summary["episodes"]
    ops, gates = summary["operations"], summary["gates"]
    rate = "-" if ops["success_rate"] is None else f"{ops['success_rate']:.3f}"
    gated = (
        f"  gates: {gates['approved']} approved, {gates['declined']} declined, {gates['hard_gate']} hard"
        if gates["requested"] or gates["hard_gate"]
        else ""
    )
    review = summary.get("user_review") or {}
    flagged = ""
    if review.get("flagged"):
        without = next(iter(review["pass_hat_k_without_flagged"]), {}).get("value")
        shown = "-" if without is None else f"{without:.3f}"
        flagged = f"  user review: {review['flagged']} flagged (pass^1 {shown} without them)"
    return (
        f"{passes}  TCR {tcr}  turns {turns}  calls ok {rate}{gated}  episodes {episodes['valid']} valid, "
        f"{episodes['infra_error']} infrastructure errors excluded{flagged}"
    )

"""The user review inside GRPO: a simulator that errs at a known rate, and how many of its mistakes train as zeros.

    python experiments/user_review_grpo.py --workdir runs/user-review-grpo [--rate 0.2] [--steps 40]

The tiny agent chain up to its GRPO (its own stages: gold synthesis, the tiny model, the cold-start SFT and the
choice of the tasks GRPO trains on), then the preset's multi-turn GRPO from the cold start twice, on the same seed,
with the scripted user wrapped in a simulator that makes one known mistake in a share ``--rate`` of the episodes
(``user_sim.fault_rate``; the kinds and wordings of ``FaultySimulator``):

- ``count``: the review flags the mistakes and leaves the episodes in the advantages (``rollout.user_review:
  count``): what training without the review trains on;
- ``exclude``: the default, a flagged episode is left out of the advantages as an infrastructure failure is.

Each run's live diagnostics label every episode with the mistake its simulator made (``rollouts.jsonl``,
``user_sim_faults``); a mistaken episode left in the advantages and scored 0 by ``task_completion`` is wrongly
zero-scored. Reported per run: the episodes, the mistakes made, those left in the advantages, those scored 0, and
the share of the trained episodes that are wrongly zero-scored, with the rollouts' ``TaskCompletion`` in the first
and last quarter of the steps.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from rewardkit.files.jsonl import read_jsonl
from rewardkit.loop.rollouts import FILE
from rewardkit.pipelines.agent import AgentPipeline, Options
from rewardkit.pipelines.chain import GrpoRun
from rewardkit.pipelines.grpo_log import grpo_steps, summarize_steps
from rewardkit.pipelines.stages import Context, run_stages

BEFORE_GRPO = ("data", "model", "sft", "select")
MODES = ("count", "exclude")


class FaultyChain(AgentPipeline):
    """The tiny agent chain whose GRPO runs talk to a simulator that errs at ``rate``, reviewed as ``review``."""

    def __init__(self, opts: Options, rate: float) -> None:
        super().__init__(opts)
        self.rate, self.review = rate, "exclude"

    def grpo_config(self, ctx: Context) -> Path:
        path = super().grpo_config(ctx)
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        raw["user_sim"] = {**raw.get("user_sim", {}), "fault_rate": self.rate}
        raw["rollout"] = {**raw.get("rollout", {}), "user_review": self.review}
        out = ctx.workdir / f"grpo_config_{self.review}.yaml"
        out.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True), encoding="utf-8")
        return out


def labelled(run_dir: Path) -> dict[str, Any]:
    """A finished run's episodes and its simulator's mistakes, summed over the steps of ``rollouts.jsonl``."""
    steps = read_jsonl(run_dir / FILE)
    made: Counter[str] = Counter()
    trained = zero = 0
    for step in steps:
        faults = step.get("user_sim_faults") or {}
        made.update(faults.get("made", {}))
        trained += faults.get("trained", 0)
        zero += faults.get("trained_zero") or 0
    episodes = sum(s["episodes"] for s in steps)
    kept = episodes - sum(s["excluded"] for s in steps)
    return {
        "steps": len(steps),
        "episodes": episodes,
        "in_advantages": kept,
        "mistakes": dict(made),
        "mistakes_in_advantages": trained,
        "wrongly_zero": zero,
        "wrongly_zero_share": zero / kept if kept else None,
        "flagged": sum(s["user_flagged"] for s in steps),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--rate", type=float, default=0.2, help="the share of episodes given a mistake")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the preset's)")
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args()
    chain = FaultyChain(Options(preset="tiny", grpo_steps=args.steps), args.rate)
    ctx = Context(workdir=args.workdir.resolve())
    ctx.results = run_stages([s for s in chain.stages() if s.name in BEFORE_GRPO], ctx)
    report = {}
    for mode in MODES:
        chain.review = mode
        run = chain.run_grpo(ctx, GrpoRun(f"grpo_{mode}", "grpo", args.seed), ctx.results["sft"]["checkpoint"])
        run_dir = Path(run["run_dir"])
        steps = summarize_steps(grpo_steps(run_dir / "logging.jsonl"))
        quarters = {q: steps[q].get("TaskCompletion") for q in ("first_quarter", "last_quarter")}
        report[mode] = {**labelled(run_dir), "rollouts_task_completion": quarters}
        print(mode, json.dumps(report[mode]), flush=True)
    (ctx.workdir / "user_review_grpo.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print("\n| review | episodes | in the advantages | mistakes made | mistakes trained | wrongly zero | share |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for mode, r in report.items():
        share = "-" if r["wrongly_zero_share"] is None else f"{r['wrongly_zero_share']:.3f}"
        made = sum(r["mistakes"].values())
        cells = f"{r['episodes']} | {r['in_advantages']} | {made} | {r['mistakes_in_advantages']} | {r['wrongly_zero']}"
        print(f"| {mode} | {cells} | {share} |")


if __name__ == "__main__":
    main()

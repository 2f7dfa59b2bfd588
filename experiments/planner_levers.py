"""One lever at a time on the tiny planner chain's GRPO, measured on its training rows.

Each lever is a set of overrides of ``recipes/planning/tiny_grpo.yaml``, trained from the SFT checkpoint of a
planner chain's workdir (``rewardkit recipe run planning --preset tiny --workdir WORKDIR`` made it) with a
checkpoint after every step, and evaluated on the chain's *training* rows only (the first 40 of the GRPO rows;
the held-out rows are never looked at while choosing), 8 completions per row sampled as that lever's rollouts
sample: the weighted reward and each of the seven rewards against the SFT checkpoint at the same sampling (the
weights the lr-1e-12 control keeps), paired by row. Per lever also: the rollouts' rewards in the first and last
quarter of the steps, the share of groups with no reward variance, and the step check.

    python experiments/planner_levers.py --workdir runs/planning --out runs/planner-levers [--only NAME ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardkit.data_builders import write_jsonl
from rewardkit.files.jsonl import read_jsonl
from rewardkit.loop.sampling import rollout_sampling
from rewardkit.pipelines.chain import GrpoRun, read_recipe
from rewardkit.pipelines.levers import lever_flags, sampling_key, training_record
from rewardkit.pipelines.planning import Options, PlanningPipeline
from rewardkit.pipelines.planning_report import evaluate_model
from rewardkit.pipelines.stages import Context
from rewardkit.recipes import recipe_path
from rewardkit.runs.stats.paired import paired_items

# name -> overrides of the preset's GRPO recipe (lr 1e-4 constant, 60 steps, 8 prompts x 8 completions a step,
# temperature 1.0, beta 0, loss grpo, rewards scaled within each group). The levers were measured against the
# preset before, 4 prompts x 8; each names that batch, so its row in docs/results.md reproduces.
FOUR = {"per_device_train_batch_size": 32}  # 4 prompts x 8 completions a step, the preset before
LEVERS: dict[str, dict[str, object]] = {
    "4 prompts x 8 (the preset before)": FOUR,
    "GDPO (each reward normalised in its group)": {**FOUR, "scale_rewards": "gdpo"},
    "no reward scaling": {**FOUR, "scale_rewards": "none"},
    "lr 3e-4": {**FOUR, "learning_rate": 3e-4},
    "lr 3e-5": {**FOUR, "learning_rate": 3e-5},
    "120 steps": {**FOUR, "max_steps": 120},  # 480 prompts: every GRPO row once, then 140 again
    "2 prompts x 16": {**FOUR, "num_generations": 16},
    "preset: 8 prompts x 8": {},
    "temperature 0.7": {**FOUR, "temperature": 0.7},
    "loss bnpo": {**FOUR, "loss_type": "bnpo"},
    "beta 0.04": {**FOUR, "beta": 0.04},
    "adam beta1 0": {**FOUR, "adam_beta1": 0.0},
    # the best combination of the levers above, measured after them
    "8 prompts x 8, lr 3e-5": {"learning_rate": 3e-5},
}
CONTENT = ("rewrite_similarity", "expert_match", "plan_coverage")
ROLLOUT_COLUMNS = ("reward", "RewriteSimilarity", "ExpertMatch", "PlanCoverage")


def row_means(scores: Path, key: str) -> dict[str, float]:
    """Each training row's mean ``key`` over its sampled completions, from an evaluation's ``scores.jsonl``."""
    cells: dict[str, list[float]] = {}
    for r in read_jsonl(scores):
        if r["mode"] == "sampled" and r["split"] == "train" and r.get(key) is not None:
            cells.setdefault(str(r["row"]), []).append(r[key])
    return {row: sum(v) / len(v) for row, v in cells.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="a planner chain's workdir (its sft stage done)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", nargs="+", choices=sorted(LEVERS), help="these levers only (default: all)")
    args = parser.parse_args()
    chain = args.workdir.resolve()
    pipeline = PlanningPipeline(Options(preset="tiny"))
    sft = json.loads((chain / ".stages" / "sft.json").read_text())["checkpoint"]
    ctx = Context(workdir=args.out.resolve(), results={"sft": {"checkpoint": sft}})
    (ctx.workdir / "data").mkdir(parents=True, exist_ok=True)
    rows = read_jsonl(chain / "data" / "grpo.jsonl")
    with pipeline.grpo_dataset(ctx).open("w", encoding="utf-8") as f:
        write_jsonl(rows, f)
    sets = {"train": rows[: pipeline.opts.eval_rows], "test": []}
    recipe = read_recipe(recipe_path(pipeline.preset.grpo))
    table_path = ctx.workdir / "levers.json"
    table = json.loads(table_path.read_text()) if table_path.is_file() else {}
    controls: dict[str, Path] = {}  # the SFT checkpoint's scores, one per sampling
    config = pipeline.reward_config()
    for lever in args.only or LEVERS:
        overrides, i = LEVERS[lever], list(LEVERS).index(lever)
        lever_recipe = {**recipe, **overrides}
        sampling = rollout_sampling(lever_recipe, sft)
        evaluate = {
            "samples": pipeline.opts.eval_samples,
            "sampling": sampling,
            "config": config,
            "max_new_tokens": int(lever_recipe["max_completion_length"]),
        }
        key = sampling_key(sampling.params())
        if key not in controls:  # the SFT checkpoint at this sampling, evaluated once per --out
            controls[key] = ctx.workdir / "eval" / f"control_{key}" / "scores.jsonl"
            if not controls[key].is_file():
                evaluate_model(ctx, f"control_{key}", sft, sets, **evaluate)
        run = pipeline.run_grpo(ctx, GrpoRun(f"lever{i}", "grpo", 42), sft, *lever_flags(overrides))
        scores = Path(evaluate_model(ctx, f"lever{i}", run["checkpoint"], sets, **evaluate)["scores"])
        table[lever] = {
            "overrides": overrides,
            "sampling": sampling.params(),
            "vs_control": {
                k: paired_items([row_means(controls[key], k)], [row_means(scores, k)]) for k in ("weighted", *CONTENT)
            },
            **training_record(Path(run["run_dir"]), ROLLOUT_COLUMNS),
        }
        print(lever, json.dumps(table[lever]), flush=True)
        table_path.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()

"""One lever at a time on the tiny agent chain's multi-turn GRPO, measured where GRPO optimises.

Each lever is a set of overrides of ``recipes/agent/tiny_grpo.yaml``, trained from the cold-start checkpoint of an
agent chain's workdir (``rewardkit recipe run agent --preset tiny --workdir WORKDIR`` made it) with a checkpoint
after every step, and evaluated on the *training* tasks only (the held-out split is never looked at while
choosing), sampled 8 times per task as that lever's rollouts sample: pass^1 against the cold start at the same
sampling (the weights the lr-1e-12 control keeps), paired by task. Per lever also: the rollouts' TaskCompletion in
the first and last quarter of the steps, the mean share of groups with zero reward variance (no gradient), and the
step check (``rewardkit audit --step-check``: did the updates make the rollouts with a positive advantage more
likely?). ``--tasks`` trains and evaluates on some training tasks only.

    python experiments/agent_levers.py --workdir runs/evidence-retail --out runs/levers [--only NAME ...] [--tasks IDS]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from rewardkit.data_builders import write_jsonl
from rewardkit.files.jsonl import read_jsonl
from rewardkit.loop.sampling import rollout_sampling
from rewardkit.pipelines.agent import AgentPipeline, Options, rows_of
from rewardkit.pipelines.chain import GrpoRun, read_recipe
from rewardkit.pipelines.levers import lever_flags, sampling_key, training_record
from rewardkit.pipelines.stages import Context
from rewardkit.recipes import recipe_path
from rewardkit.runs.episodes.evaluation import evaluate_run
from rewardkit.runs.episodes.spec import task_ids
from rewardkit.runs.stats.paired import paired_items

# name -> overrides of the preset's GRPO recipe (lr 3e-5, 40 steps, 2 tasks x 16 rollouts a step, temperature 0.7).
# A lever names every setting it was measured with beyond today's preset, so its row in docs/results.md reproduces.
EIGHT = {"num_generations": 8, "per_device_train_batch_size": 16}  # 2 tasks x 8 rollouts, the preset before 16
LEVERS: dict[str, dict[str, object]] = {
    "preset": {},
    "8 generations": EIGHT,
    "4 tasks x 8": {"num_generations": 8, "per_device_train_batch_size": 32},
    "lr 1e-4, 20 steps": {**EIGHT, "learning_rate": 1e-4, "max_steps": 20},
    "lr 1e-4, 20 steps, 4 tasks x 8": {
        "num_generations": 8,
        "per_device_train_batch_size": 32,
        "learning_rate": 1e-4,
        "max_steps": 20,
    },
    "lr 1e-4, 20 steps, beta 0.04": {**EIGHT, "learning_rate": 1e-4, "max_steps": 20, "beta": 0.04},
    "loss bnpo": {**EIGHT, "loss_type": "bnpo"},
    "temperature 1.0": {"temperature": 1.0},
    "no reward scaling": {"scale_rewards": "none"},
    "epsilon 0.1": {"epsilon": 0.1},
    "6 turns": {"max_turns": 6},  # the evaluation runs as many: AgentPipeline.rollout_loop
    "6 turns, adam beta1 0": {"max_turns": 6, "adam_beta1": 0.0},  # no momentum: each step follows its own batch
}


def task_means(eval_dir: Path) -> dict[str, float]:
    """Each task's sampled pass^1 in an ``eval agent`` output folder (its task table)."""
    return {r["task_id"]: r["pass1"] for r in read_jsonl(eval_dir / "tasks.jsonl") if r["pass1"] is not None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="an agent chain's workdir (its sft stage done)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--only", nargs="+", choices=sorted(LEVERS), help="these levers only (default: all)")
    parser.add_argument("--tasks", help="comma-separated training task ids: train and evaluate on these only")
    args = parser.parse_args()
    chain = Context(workdir=args.workdir.resolve())
    markers = chain.workdir / ".stages"
    chain.results = {name: json.loads((markers / f"{name}.json").read_text()) for name in ("data", "sft")}
    pipeline = AgentPipeline(Options(domain=chain.results["data"]["domain"]))  # the chain's domain
    recipe = read_recipe(recipe_path(pipeline.preset.grpo))
    ctx = Context(workdir=args.out.resolve(), results=chain.results)
    (ctx.workdir / "data").mkdir(parents=True, exist_ok=True)
    chosen = chain.results["data"]["tasks"] if args.tasks is None else list(task_ids(args.tasks))
    unknown = sorted(set(chosen) - set(chain.results["data"]["tasks"]))
    if unknown:
        parser.error(f"--tasks {','.join(unknown)}: not training tasks of {args.workdir}")
    with (ctx.workdir / "data" / "grpo.jsonl").open("w", encoding="utf-8") as f:
        write_jsonl(rows_of(read_jsonl(chain.workdir / "data" / "grpo.jsonl"), chosen), f)
    table_path = ctx.workdir / "levers.json"
    table = json.loads(table_path.read_text()) if table_path.is_file() else {}
    controls: dict[str, str] = {}  # one control per sampling and loop
    for lever in args.only or LEVERS:
        overrides, i = LEVERS[lever], list(LEVERS).index(lever)
        lever_recipe = {**recipe, **overrides}
        sampling = rollout_sampling(lever_recipe, chain.results["sft"]["checkpoint"])
        tasks = pipeline.run_spec(
            chain,
            sampling=sampling,
            recipe=lever_recipe,
            user="scripted",
            trials=args.trials,
            split="train",
            tasks=chosen,
            agent=chain.results["sft"]["checkpoint"],
        )
        loop = {**sampling.params(), "max_turns": tasks.max_turns, "max_tokens": tasks.max_tokens}
        key = sampling_key(loop)
        if key not in controls:  # the SFT checkpoint's weights (the lr-1e-12 control's), sampled and looped alike
            controls[key] = str(ctx.workdir / f"control_{key}" / "eval")
            evaluate_run(tasks, Path(controls[key]), resume=True, progress=False, title=f"the cold start, {key}")
        sft = chain.results["sft"]["checkpoint"]
        run = pipeline.run_grpo(ctx, GrpoRun(f"lever{i}", "grpo", 42), sft, *lever_flags(overrides))
        out = ctx.workdir / f"lever{i}" / "eval"
        summary = evaluate_run(dataclasses.replace(tasks, agent=run["checkpoint"]), out, progress=False, title=lever)
        table[lever] = {
            "overrides": overrides,
            "sampling": sampling.params(),
            "sampled_pass1": summary["pass_hat_k"][0]["value"],
            "vs_control": paired_items([task_means(Path(controls[key]))], [task_means(out)]),
            **training_record(Path(run["run_dir"]), ("TaskCompletion",)),
        }
        print(lever, json.dumps(table[lever]), flush=True)
        table_path.write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()

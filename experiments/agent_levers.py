"""One lever at a time on the tiny agent chain's multi-turn GRPO, measured where GRPO optimises.

Each lever is one change to ``recipes/agent/tiny_grpo.yaml``, trained from the cold-start checkpoint of an agent
chain's workdir (``rewardkit recipe run agent --preset tiny --workdir WORKDIR`` made it) and evaluated by
sampling (8 trials per task, as the GRPO rollouts sample) on the *training* tasks only: the held-out split is never
looked at while choosing. Per lever: sampled pass^1, the rollouts' TaskCompletion in the first and last quarter
of the steps, and the mean share of groups with zero reward variance (no gradient).

    python experiments/agent_levers.py --workdir runs/evidence-retail --out runs/levers [--first N]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from rewardkit.pipelines.agent import AgentPipeline, Options
from rewardkit.pipelines.chain import GrpoRun
from rewardkit.pipelines.grpo_log import grpo_steps, summarize_steps
from rewardkit.pipelines.stages import Context
from rewardkit.runs.evaluation import evaluate_run

LEVERS = {
    "control (lr 1e-12)": ["--learning_rate", "1e-12"],
    "preset (lr 1e-4, 20 steps, 8 generations)": [],
    "lr 3e-4": ["--learning_rate", "3e-4"],
    "40 steps": ["--max_steps", "40", "--save_steps", "40"],
    "16 generations (2 tasks x 16)": ["--num_generations", "16", "--per_device_train_batch_size", "32"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="a agent chain's workdir (its sft stage done)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--first", type=int, default=len(LEVERS), help="only the first N levers (default: all)")
    args = parser.parse_args()
    chain = Context(workdir=args.workdir.resolve())
    markers = chain.workdir / ".stages"
    chain.results = {name: json.loads((markers / f"{name}.json").read_text()) for name in ("data", "sft")}
    pipeline = AgentPipeline(Options(domain=chain.results["data"]["domain"]))  # the chain's domain
    ctx = Context(workdir=args.out.resolve(), results=chain.results)
    (ctx.workdir / "data").mkdir(parents=True, exist_ok=True)
    grpo_rows = chain.workdir / "data" / "grpo.jsonl"
    (ctx.workdir / "data" / "grpo.jsonl").write_bytes(grpo_rows.read_bytes())
    table = {}
    for i, (lever, flags) in enumerate(list(LEVERS.items())[: args.first]):
        result = pipeline.run_grpo(ctx, GrpoRun(f"lever{i}", "grpo", 42), chain.results["sft"]["checkpoint"], *flags)
        spec = pipeline.run_spec(chain, agent=result["checkpoint"], user="scripted", trials=args.trials,
                                 sampling=pipeline.grpo_sampling(),
                                 split="train", tasks=chain.results["data"]["tasks"])  # fmt: skip
        summary = evaluate_run(spec, ctx.workdir / f"lever{i}" / "eval", progress=False, title=lever)
        steps = summarize_steps(grpo_steps(Path(result["run_dir"]) / "logging.jsonl"))
        shares = [s for s in steps["zero_std_share"] if s is not None]
        table[lever] = {
            "sampled_pass1": summary["pass_hat_k"][0]["value"],
            "rollouts_first_quarter": steps["first_quarter"].get("TaskCompletion"),
            "rollouts_last_quarter": steps["last_quarter"].get("TaskCompletion"),
            "zero_std_share": sum(shares) / len(shares) if shares else None,
            "flags": flags,
        }
        print(lever, json.dumps(table[lever]), flush=True)
    (ctx.workdir / "levers.json").write_text(json.dumps(table, indent=2) + "\n")


if __name__ == "__main__":
    main()

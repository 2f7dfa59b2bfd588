"""``rewardkit recipe list|run``: the bundled recipes, and the resumable build -> SFT -> GRPO pipeline.

``add_parsers(sub)`` adds ``recipe``; its handlers are ``cmd_recipe_list`` and ``cmd_recipe_run``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rewardkit.recipes import EXAMPLES

# The pipelines `recipe run` can run; every other CATALOG entry is a set of configs for `swift` itself.
RUNNABLE = ("planning", "tau2")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    recipe = sub.add_parser("recipe", help="list or run the bundled pipelines")
    actions = recipe.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="list the recipes").set_defaults(func=cmd_recipe_list)
    run = actions.add_parser("run", help="build -> SFT -> GRPO, resumable")
    run.add_argument("pipeline", choices=RUNNABLE)
    run.add_argument("--preset", default="tiny", choices=["tiny", "full"], help="tiny: CPU demo; full: your model")
    run.add_argument("--workdir", type=Path, help="outputs, logs and stage markers (default: runs/PIPELINE)")
    run.add_argument("--data", type=Path, default=EXAMPLES, help="teacher and annotated records (default: bundled)")
    run.add_argument("--model", help="base model (full preset): local path or hub id")
    run.add_argument("--force", action="append", default=[], metavar="STAGE", help="redo STAGE and the ones after")
    run.add_argument("--sft-steps", type=int, help="override the SFT length (steps)")
    run.add_argument("--grpo-steps", type=int, help="override the GRPO length (steps)")
    run.add_argument("--eval-rows", type=int, help="planning: evaluate on the first N test rows only")
    tau2 = run.add_argument_group("tau2")
    tau2.add_argument("--agent", default="gold", help="who synthesises the cold-start data: gold, or a teacher URL")
    tau2.add_argument("--user", default="scripted", help="the user simulator: scripted, or a URL")
    tau2.add_argument("--eval-user", help="the user simulator of the evaluation (default: --user)")
    tau2.add_argument("--eval-tasks", type=int, help="evaluate on the first N held-out tasks only")
    run.add_argument("--baseline", action="store_true",
                     help="also run GRPO from the untrained model, and a no-learning control from SFT")  # fmt: skip
    run.set_defaults(func=cmd_recipe_run)


def cmd_recipe_list(args: argparse.Namespace) -> int:
    from rewardkit.recipes import CATALOG, ROOT

    for pipeline, files in CATALOG.items():
        # Only a pipeline `recipe run` accepts is advertised as runnable; the rest are swift configs.
        how = (
            f"rewardkit recipe run {pipeline}"
            if pipeline in RUNNABLE
            else f"swift configs only; no `recipe run {pipeline}`"
        )
        print(f"{pipeline}  ({how})")
        for f in files:
            how = f"swift {f.command} {ROOT.name}/{f.name}" if f.command != "rewardkit" else "REWARDKIT_CONFIG"
            print(f"  {f.name:<34} {f.summary}  [{how}]")
    return 0


def _table(summary: dict) -> str:
    lines = []
    ev = summary["eval"]
    keys = [k for k in ev["base"] if k != "weighted"] + ["weighted"]
    lines.append(f"{'test split':<20}" + "".join(f"{k[:12]:>13}" for k in keys))
    for name in ("base", "sft"):
        lines.append(f"{name:<20}" + "".join(f"{ev[name][k]:>13.3f}" for k in keys))
    for stage in ("grpo", "grpo_base", "grpo_control"):
        if stage in summary:
            s = summary[stage]
            lines.append(f"{stage} weighted reward: first logged step {s['first']['reward']:.3f}, "
                         f"last {s['last']['reward']:.3f}; first quarter {s['first_quarter']['reward']:.3f} "
                         f"-> last quarter {s['last_quarter']['reward']:.3f}")  # fmt: skip
    return "\n".join(lines)


def _tau2_table(summary: dict) -> str:
    lines = [f"{'pass^1 (greedy)':<16}{'train tasks':>12}{'held-out':>10}{'valid calls':>13}"]
    for model, splits in summary["models"].items():
        train, test = splits["train"], splits["test"]
        lines.append(f"{model:<16}{train['pass_hat_k']['1']:>12.3f}{test['pass_hat_k']['1']:>10.3f}"
                     f"{train['valid_tool_calls']:>8}/{train['tool_calls']:<4}")  # fmt: skip
    for name, p in summary["paired"].items():
        lines.append(f"{name}: {p['diff']:+.3f} [{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}] over {p['paired_tasks']} tasks")
    return "\n".join(lines)


def _pipeline(args: argparse.Namespace):
    if args.pipeline == "tau2":
        from rewardkit.pipelines.tau2 import Options as Tau2Options
        from rewardkit.pipelines.tau2 import Tau2Pipeline

        return Tau2Pipeline(Tau2Options(
            preset=args.preset, model=args.model, agent=args.agent, user=args.user, eval_user=args.eval_user,
            sft_steps=args.sft_steps, grpo_steps=args.grpo_steps, eval_tasks=args.eval_tasks, baseline=args.baseline,
        ))  # fmt: skip
    from rewardkit.pipelines.planning import Options, PlanningPipeline

    opts = Options(preset=args.preset, data=args.data, model=args.model, sft_steps=args.sft_steps,
                   grpo_steps=args.grpo_steps, eval_rows=args.eval_rows, baseline=args.baseline)  # fmt: skip
    return PlanningPipeline(opts)


def cmd_recipe_run(args: argparse.Namespace) -> int:
    from rewardkit.pipelines.stages import Context, StageError, prepare_workdir, run_stages

    # Bad options, --data or --workdir raise PipelineError: one line and exit 2 from cli.main.
    pipeline = _pipeline(args)
    ctx = Context(workdir=(args.workdir or Path("runs") / args.pipeline).resolve())
    prepare_workdir(ctx.workdir)
    try:
        run_stages(pipeline.stages(), ctx, args.force)
    except StageError as exc:  # a stage ran and failed: its log has the details
        print(f"rewardkit recipe run: {exc}", file=sys.stderr)
        return 1
    summary = json.loads((ctx.workdir / "summary.json").read_text())
    print(_tau2_table(summary) if args.pipeline == "tau2" else _table(summary))
    print(f"summary: {ctx.workdir / 'summary.json'}")
    return 0

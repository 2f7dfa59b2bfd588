"""``rewardkit recipe list|run``: the bundled recipes, and the resumable build -> SFT -> GRPO pipeline.

``add_parsers(sub)`` adds ``recipe``; its handlers are ``cmd_recipe_list`` and ``cmd_recipe_run``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rewardkit.cli.env import DOMAIN_HELP
from rewardkit.recipes import EXAMPLES

# The pipelines `recipe run` can run; every other CATALOG entry is a set of configs for `swift` itself.
RUNNABLE = ("planning", "agent")


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
    run.add_argument(
        "--eval-rows",
        type=int,
        default=40,
        help="planning: evaluate on the first N test rows and N training rows (default: 40)",
    )
    run.add_argument(
        "--eval-samples",
        type=int,
        help="sampled completions (planning) or trials (agent) per task, drawn as the GRPO rollouts are "
        "(default: 8; the tiny agent preset 32)",
    )
    run.add_argument("--seeds", type=int, default=1, help="repeat the GRPO runs under N seeds (default: 1)")
    run.add_argument(
        "--band",
        type=_band,
        metavar="LOW,HIGH",
        help="agent: GRPO trains on the training tasks the cold start completes in this share of its "
        "sampled trials (default: the preset's, tiny 0.1,0.7; 0,1: all of them)",
    )
    run.add_argument(
        "--sign-test",
        action="store_true",
        help="also GRPO on the inverted reward, and the control: they must move apart",
    )
    agent = run.add_argument_group("agent")
    agent.add_argument("--domain", default="retail", help=DOMAIN_HELP + " (default: retail)")
    agent.add_argument("--agent", default="gold", help="who synthesises the cold-start data: gold, or a teacher URL")
    agent.add_argument("--user", default="scripted", help="the user simulator: scripted, or a URL")
    agent.add_argument("--eval-user", help="the user simulator of the evaluation: scripted, or a URL (default: --user)")
    agent.add_argument("--eval-tasks", type=int, help="evaluate on the first N held-out tasks only")
    agent.add_argument("--eval-train-tasks", type=int, help="evaluate on the first N training tasks only")
    run.add_argument(
        "--baseline",
        action="store_true",
        help="also run GRPO from the untrained model, and a no-learning control from SFT",
    )
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


def _cell(spread: dict | None) -> str:
    if not spread or spread["mean"] is None:
        return "-"
    return f"{spread['mean']:.3f}" + (f" ± {spread['sd']:.3f}" if spread["runs"] > 1 else "")


def _evidence(summary: dict, figures: dict, metric: str) -> list[str]:
    """The kinds' figures (mean ± sd over seeds), GRPO against the control, and the sign test."""
    cells = [(mode, split) for mode in ("greedy", "sampled") for split in ("train", "test")]
    lines = [f"{metric:<22}" + "".join(f"{mode + ' ' + split:>20}" for mode, split in cells)]
    for kind in figures["greedy"]["train"]:
        lines.append(f"{kind:<22}" + "".join(f"{_cell(figures[mode][split].get(kind)):>20}" for mode, split in cells))
    for name, pair in summary["paired"].items():
        for cell, where in (("sampled_grpo", "GRPO's tasks"), ("sampled_train", "train"), ("sampled_test", "test")):
            if cell in pair:
                p = pair[cell]
                lines.append(
                    f"{name} (sampled, {where}): {p['diff']:+.3f} [{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}] "
                    f"over {p['items']} items"
                )
    sign = summary.get("sign_test")
    if sign:
        moves = sign["directions"]
        verdict = "the gradient points the right way" if sign["opposite"] else "NOT opposite: check the gradient path"
        lines.append(f"sign test ({sign['metric']}): GRPO {moves['grpo']}, inverted {moves['inverted']}: {verdict}")
    return lines


def _table(summary: dict) -> str:
    lines = _evidence(summary, summary["weighted"], "weighted reward")
    sft = summary["models"]["sft"]["greedy"]["test"]
    lines.append("SFT on the test split, greedy: " + ", ".join(f"{k} {v:.3f}" for k, v in sft.items()))
    return "\n".join(lines)


def _agent_table(summary: dict) -> str:
    return "\n".join(_evidence(summary, summary["pass1"], "pass^1"))


def _pipeline(args: argparse.Namespace):
    if args.pipeline == "agent":
        from rewardkit.pipelines.agent import AgentPipeline
        from rewardkit.pipelines.agent import Options as AgentOptions

        return AgentPipeline(
            AgentOptions(
                preset=args.preset,
                model=args.model,
                domain=args.domain,
                agent=args.agent,
                user=args.user,
                eval_user=args.eval_user,
                sft_steps=args.sft_steps,
                grpo_steps=args.grpo_steps,
                eval_tasks=args.eval_tasks,
                baseline=args.baseline,
                eval_train_tasks=args.eval_train_tasks,
                seeds=args.seeds,
                sign_test=args.sign_test,
                eval_samples=args.eval_samples,
                band=args.band,
            )
        )
    from rewardkit.pipelines.planning import Options, PlanningPipeline
    from rewardkit.pipelines.stages import PipelineError

    if args.band is not None:
        raise PipelineError("--band chooses the agent chain's GRPO tasks; the planning chain trains on every row")

    samples = {"eval_samples": args.eval_samples} if args.eval_samples else {}  # else the chain's default
    opts = Options(
        preset=args.preset,
        data=args.data,
        model=args.model,
        sft_steps=args.sft_steps,
        grpo_steps=args.grpo_steps,
        eval_rows=args.eval_rows,
        baseline=args.baseline,
        seeds=args.seeds,
        sign_test=args.sign_test,
        **samples,
    )
    return PlanningPipeline(opts)


def _band(text: str) -> tuple[float, float]:
    try:
        low, high = (float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give two shares, LOW,HIGH (0.1,0.7)") from None
    if not 0 <= low <= high <= 1:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= LOW <= HIGH <= 1")
    return low, high


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
    print(_agent_table(summary) if args.pipeline == "agent" else _table(summary))
    print(f"summary: {ctx.workdir / 'summary.json'}")
    return 0

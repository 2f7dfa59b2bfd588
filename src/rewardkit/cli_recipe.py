"""``rewardkit recipe list|run`` and ``rewardkit tiny-model``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rewardkit.recipes import EXAMPLES

# The pipelines `recipe run` can run; every other CATALOG entry is a set of configs for `swift` itself.
RUNNABLE = ("planning",)


def add_recipe_parsers(sub: argparse._SubParsersAction) -> None:
    recipe = sub.add_parser("recipe", help="list or run the bundled pipelines")
    actions = recipe.add_subparsers(dest="action", required=True)
    actions.add_parser("list", help="list the recipes").set_defaults(func=cmd_list)
    run = actions.add_parser("run", help="build -> SFT -> GRPO, resumable")
    run.add_argument("pipeline", choices=RUNNABLE)
    run.add_argument("--preset", default="tiny", choices=["tiny", "full"], help="tiny: CPU demo; full: your model")
    run.add_argument("--workdir", type=Path, default=Path("runs/planning"), help="outputs, logs and stage markers")
    run.add_argument("--data", type=Path, default=EXAMPLES, help="teacher and annotated records (default: bundled)")
    run.add_argument("--model", help="base model (full preset): local path or hub id")
    run.add_argument("--force", action="append", default=[], metavar="STAGE", help="redo STAGE and the ones after")
    run.add_argument("--sft-steps", type=int, help="override the SFT length (steps)")
    run.add_argument("--grpo-steps", type=int, help="override the GRPO length (steps)")
    run.add_argument("--eval-rows", type=int, help="evaluate on the first N test rows only")
    run.add_argument("--baseline", action="store_true",
                     help="also run GRPO from the untrained model, and a no-learning control from SFT")  # fmt: skip
    run.set_defaults(func=cmd_run)
    tiny = sub.add_parser("tiny-model", help="build the offline tiny Qwen3 used by the CPU preset and tests")
    tiny.add_argument("out", type=Path)
    tiny.add_argument("--data", type=Path, default=EXAMPLES, help="*.jsonl corpus for the tokenizer (default: bundled)")
    tiny.set_defaults(func=cmd_tiny)


def cmd_list(args: argparse.Namespace) -> int:
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


def cmd_tiny(args: argparse.Namespace) -> int:
    from rewardkit.pipeline import PipelineError
    from rewardkit.planning_pipeline import TINY_MODEL, planning_corpus
    from rewardkit.tiny_model import build_tiny_model

    # The output is checked before anything is read: an unwritable OUT fails now, not after the training.
    if args.out.exists() and not args.out.is_dir():
        raise PipelineError(f"{args.out}: exists and is not a directory")
    created = not args.out.exists()
    try:
        args.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PipelineError(f"{args.out}: cannot create the output directory ({exc.strerror or exc})") from None
    try:
        corpus = planning_corpus(args.data.resolve())  # an empty corpus raises: no 261-token model
    except Exception:
        if created:
            args.out.rmdir()
        raise
    out = build_tiny_model(args.out, corpus, **TINY_MODEL)
    print(out)
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


def cmd_run(args: argparse.Namespace) -> int:
    from rewardkit.pipeline import Context, StageError, prepare_workdir, run_stages
    from rewardkit.planning_pipeline import Options, PlanningPipeline

    opts = Options(preset=args.preset, data=args.data, model=args.model, sft_steps=args.sft_steps,
                   grpo_steps=args.grpo_steps, eval_rows=args.eval_rows, baseline=args.baseline)  # fmt: skip
    # Bad options, --data or --workdir raise PipelineError: one line and exit 2 from cli.main.
    pipeline = PlanningPipeline(opts)
    ctx = Context(workdir=args.workdir.resolve())
    prepare_workdir(ctx.workdir)
    try:
        run_stages(pipeline.stages(), ctx, args.force)
    except StageError as exc:  # a stage ran and failed: its log has the details
        print(f"rewardkit recipe run: {exc}", file=sys.stderr)
        return 1
    summary = json.loads((ctx.workdir / "summary.json").read_text())
    print(_table(summary))
    print(f"summary: {ctx.workdir / 'summary.json'}")
    return 0

"""``rewardkit build <name>``: raw data → ms-swift JSONL, with counts for every rejection.

Like every ``cli_*`` module: ``add_parsers(sub)`` adds the subcommand, and each handler is
``cmd_<command>_<action>`` (``cmd_build_planning`` for planning-sft and planning-grpo, ``cmd_build_tau2``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rewardkit.cli.env import DOMAIN_HELP
from rewardkit.data_builders import BuildError, BuildReport, write_jsonl
from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputError, OutputSet, check_outputs


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--input",
        "-i",
        action="append",
        required=True,
        metavar="FILE[:RATIO]",
        help="input JSONL; repeat to mix inputs, optionally in the given ratios",
    )
    p.add_argument("--out", "-o", required=True, type=Path, help="output JSONL")
    p.add_argument("--rejects", type=Path, help="write rejected records with their reasons here")
    p.add_argument("--report", type=Path, help="write the counts as JSON here")
    p.add_argument("--schema", default="zh", help="answer schema preset: zh (default) or en")
    p.add_argument("--no-think", action="store_true", help="answer-only prompts (think-vs-no-think comparison)")
    p.add_argument("--history-turns", type=int, default=3, help="dialogue turns rendered into the prompt")
    p.add_argument("--prompt", help="system prompt template (default: recipes/planning/system_prompt*.txt)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--on-error", choices=["stop", "skip"], default="stop", help="on a malformed input line")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    build = sub.add_parser("build", help="build ms-swift datasets from raw data")
    names = build.add_subparsers(dest="builder", required=True)
    sft = names.add_parser("planning-sft", help="teacher (R1-distilled) outputs -> SFT rows")
    _common(sft)
    sft.add_argument("--think-min", type=int, default=20, help="shortest think kept (characters)")
    sft.add_argument("--think-max", type=int, default=300, help="longest think kept (characters)")
    sft.add_argument("--keep-shortest", type=float, default=1.0, help="keep this fraction, shortest thinks first")
    sft.set_defaults(func=cmd_build_planning)
    grpo = names.add_parser("planning-grpo", help="annotated plans -> GRPO rows (messages, solution, experts)")
    _common(grpo)
    grpo.set_defaults(func=cmd_build_planning)
    tau2 = names.add_parser(
        "tau2-grpo", help="a domain's tasks (tau2's format) -> GRPO rows (policy, opening, tools, task)"
    )
    tau2.add_argument("--domain", default="retail", help=DOMAIN_HELP + " (default: retail)")
    tau2.add_argument("--split", required=True, help="split name in the split file: train, test or base")
    tau2.add_argument("--out", "-o", required=True, type=Path, help="output JSONL")
    tau2.add_argument("--tasks-file", type=Path, help="tau2 tasks.json (default: the domain's vendored copy)")
    tau2.add_argument("--split-file", type=Path, help="tau2 split_tasks.json (default: the vendored copy)")
    tau2.add_argument("--policy-file", type=Path, help="system prompt (default: the domain's policy.md)")
    tau2.add_argument("--rejects", type=Path, help="write the rejected tasks with their reasons here")
    tau2.add_argument("--report", type=Path, help="write the counts as JSON here")
    tau2.add_argument(
        "--multi-turn",
        action="store_true",
        help="rows for the simulated_user scheduler: the user simulator writes the first user turn at rollout time",
    )
    tau2.set_defaults(func=cmd_build_tau2)


def _fail(builder: str, exc: Exception) -> int:
    print(f"rewardkit build {builder}: {exc}", file=sys.stderr)
    return 2


def cmd_build_planning(args: argparse.Namespace) -> int:
    from rewardkit.data_builders import parse_input

    common = dict(
        schema=args.schema,
        no_think=args.no_think,
        history_turns=args.history_turns,
        seed=args.seed,
        on_error=args.on_error,
        prompt=args.prompt,
    )
    try:
        inputs = [parse_input(s) for s in args.input]
        sources: list[tuple[str, Path | str] | None] = [("--input", s.path) for s in inputs]
        sources.append(("--prompt", args.prompt) if args.prompt else None)
        sources.append(("--schema", args.schema) if args.schema not in ("zh", "en") else None)
        check_outputs(sources, _outputs(args))
        if args.builder == "planning-sft":
            from rewardkit.data_builders.planning.sft import SftOptions, build_sft

            opts = SftOptions(
                think_min=args.think_min, think_max=args.think_max, keep_shortest=args.keep_shortest, **common
            )
            rows, report = build_sft(inputs, opts)
        else:
            from rewardkit.data_builders.planning.grpo import GrpoOptions, build_grpo

            rows, report = build_grpo(inputs, GrpoOptions(**common))
        _write(args, rows, report)
    except (BuildError, OutputError, ValueError, OSError) as exc:  # ValueError: a bad --schema or option
        return _fail(args.builder, exc)
    print(f"{args.builder} -> {args.out}\n{report.render()}", file=sys.stderr)
    return 0


def _outputs(args: argparse.Namespace) -> list[tuple[str, Path] | None]:
    rejects = getattr(args, "rejects", None)
    return [
        ("--out", args.out),
        ("--rejects", rejects) if rejects else None,
        ("--report", args.report) if args.report else None,
    ]


def _write(args: argparse.Namespace, rows: list, report: BuildReport) -> None:
    """Rows to --out, the rejects and the counts where asked for: all renamed into place together,
    only once every one of them is completely written."""
    with OutputSet() as outputs:
        with outputs.open(args.out, "--out") as f:
            write_jsonl(rows, f)
        if getattr(args, "rejects", None):
            with outputs.open(args.rejects, "--rejects") as f:
                write_jsonl(report.rejects, f)
        if args.report:
            outputs.write_text(args.report, dumps(report.as_dict(), indent=2) + "\n", "--report")


def cmd_build_tau2(args: argparse.Namespace) -> int:
    from rewardkit.data_builders.tau2 import Tau2Options, build_tau2_grpo
    from rewardkit.envs import get_domain

    opts = Tau2Options(
        domain=args.domain,
        split=args.split,
        multi_turn=args.multi_turn,
        tasks_file=args.tasks_file,
        split_file=args.split_file,
        policy_file=args.policy_file,
    )
    files = (("--tasks-file", args.tasks_file), ("--split-file", args.split_file), ("--policy-file", args.policy_file))
    try:
        try:
            bundled = get_domain(args.domain).input_files()  # read by default, and by the gold replays
        except ValueError as exc:  # an unknown domain
            raise BuildError(str(exc)) from None
        check_outputs([*((flag, path) if path else None for flag, path in files), *bundled], _outputs(args))
        rows, report = build_tau2_grpo(opts)
        _write(args, rows, report)
    except (BuildError, OutputError) as exc:
        return _fail("tau2-grpo", exc)
    print(f"tau2-grpo ({args.domain}/{args.split}) -> {args.out}\n{report.render()}", file=sys.stderr)
    return 0

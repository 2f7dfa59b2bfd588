"""``rewardkit synth tau2``: verified multi-turn tool-use trajectories as ms-swift SFT rows (a cold start).

``add_parsers(sub)`` adds ``synth``; its handler is ``cmd_synth_tau2``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rewardkit.files.outputs import check_outputs
from rewardkit.runs.spec import add_run_options, build_plan


def add_parsers(sub: argparse._SubParsersAction) -> None:
    synth = sub.add_parser("synth", help="synthesise SFT trajectories by running agent, simulated user and tools")
    actions = synth.add_subparsers(dest="action", required=True)
    tau2 = actions.add_parser(
        "tau2",
        help="episodes on a tau2 domain; keep those task_completion scores 1.0",
        description="Run --trials episodes per task of --split (agent <-> simulated user <-> database), keep "
        "the ones task_completion scores 1.0, and write them as ms-swift agent-format SFT rows. Every "
        "episode is logged as it ends (--episodes); --resume continues a run and retries failed "
        "infrastructure.",
    )
    add_run_options(tau2, split="train", trials=1)
    out = tau2.add_argument_group("outputs")
    out.add_argument("--out", type=Path, required=True, metavar="SFT.jsonl", help="the kept rows")
    out.add_argument("--report", type=Path, metavar="REPORT.json", help="counts per task and per reason")
    out.add_argument("--episodes", type=Path, help="the episode log (default: OUT with .episodes.jsonl)")
    tau2.set_defaults(func=cmd_synth_tau2)


def cmd_synth_tau2(args: argparse.Namespace) -> int:
    from rewardkit.runs.episode_log import EpisodeLog
    from rewardkit.runs.synthesis import synthesize

    episodes = args.episodes or args.out.with_suffix(".episodes.jsonl")
    inputs = [("--system-prompt", args.system_prompt)] if args.system_prompt else []
    report = ("--report", args.report) if args.report else None
    check_outputs(inputs, [("--out", args.out), report, ("--episodes", episodes)])
    plan, meta = build_plan(args)
    log = EpisodeLog(episodes, meta["run"], args.resume)
    tools = None if args.no_tools else json.dumps(plan.domain.tool_specs(), ensure_ascii=False)
    report = synthesize(plan, log, args.out, args.report, tools, meta, progress=not args.no_progress)
    rejected = ", ".join(f"{k} {v}" for k, v in report["rejected"].items()) or "none"
    print(
        f"read {report['read']}  kept {report['kept']} ({report['tasks_with_a_kept_episode']} of "
        f"{len(report['per_task'])} tasks)  rejected: {rejected}",
        file=sys.stderr,
    )
    infra = sum(report["rejected"].get(k, 0) for k in ("user_sim_error", "agent_error"))
    if infra:
        print(f"{infra} episode(s) hit an infrastructure error; rerun with --resume to retry them", file=sys.stderr)
    return 0

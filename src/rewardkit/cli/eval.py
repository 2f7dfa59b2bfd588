"""``rewardkit eval agent|compare``: evaluate an agent on a domain; compare two runs, paired by task.

``add_parsers(sub)`` adds ``eval``; each action has an ``_add_<action>(actions)`` that declares its options
and a handler ``cmd_eval_<action>``. A new action (``eval NAME``) is one more ``_add_…`` call and one handler.
User errors (a missing file, a bad line, no shared task) raise and reach ``rewardkit.cli.main``, which prints
them as one line with exit code 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rewardkit.cli.synth import (
    _add_run_options,
    _real_user,
    _resume_hint,
    _retry_hint,
    _run_inputs,
    _run_spec,
    _servers_failed,
)
from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputSet, check_outputs
from rewardkit.loop.ledger import ledger_lines
from rewardkit.runs.episodes.evaluation import FILES, evaluate_run, headline
from rewardkit.runs.stats.metrics import EvalError, compare
from rewardkit.runs.stats.tables import read_run


def add_parsers(sub: argparse._SubParsersAction) -> None:
    evaluate = sub.add_parser("eval", help="evaluate agents and compare evaluation runs")
    actions = evaluate.add_subparsers(dest="action", required=True)
    _add_agent(actions)
    _add_compare(actions)


def _add_agent(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser(
        "agent",
        help="pass^k, task completion, turns and tool use of an agent on a domain's split",
        description="Run --trials episodes per task of --split (agent <-> simulated user <-> database) and "
        "report tau-bench's pass^k for k = 1..trials, mean task_completion_rate, turns, tool calls, "
        "termination reasons and tool use, per task and overall. Infrastructure errors are excluded and "
        "counted; --resume reruns them.",
    )
    _add_run_options(p, split="test", trials=4)
    p.add_argument("--out-dir", type=Path, required=True, help=f"writes {', '.join(FILES)}")
    p.add_argument("--title", default=None, help="the plot's title (default: the agent and the domain)")
    p.set_defaults(func=cmd_eval_agent)


def cmd_eval_agent(args: argparse.Namespace) -> int:
    out: Path = args.out_dir
    check_outputs(_run_inputs(args), [("--out-dir", out / name) for name in FILES])
    with _real_user(_run_spec(args)) as spec, _resume_hint():
        summary = evaluate_run(spec, out, resume=args.resume, progress=not args.no_progress, title=args.title)
    _servers_failed(summary["termination"], summary["episodes"]["total"], out / "episodes.jsonl")
    print(headline(summary))
    for line in ledger_lines(summary["ledger"]):
        print(line)
    _retry_hint(summary["episodes"]["infra_error"])  # status infra_error: every ending in EXCLUDED
    return 0


def _add_compare(actions: argparse._SubParsersAction) -> None:
    p = actions.add_parser("compare", help="pass^1 of run B against run A on their shared tasks, with a bootstrap CI")
    # dest "input": rewardkit.cli names these files when an input cannot be decoded.
    p.add_argument(
        "input",
        nargs=2,
        type=Path,
        metavar="RUN.jsonl",
        help="run A (the baseline), then run B: episodes.jsonl or a per-task table",
    )
    p.add_argument("--out", type=Path, metavar="compare.json", help="write the full comparison as JSON here")
    p.add_argument("--png", type=Path, metavar="compare.png", help="plot per-task pass^1 and the difference")
    p.add_argument("--boot", type=int, default=10_000, help="bootstrap resamples (default: 10000)")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: 0)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (default: 0.95)")
    p.set_defaults(func=cmd_eval_compare)


def _ids(rows: Sequence[Mapping[str, Any]] | Sequence[str], limit: int = 30) -> str:
    ids = [str(r["task_id"]) if isinstance(r, Mapping) else r for r in rows]
    more = f", … (+{len(ids) - limit})" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more if ids else "-"


def cmd_eval_compare(args: argparse.Namespace) -> int:
    a_path, b_path = args.input
    outputs = [("--out", args.out) if args.out else None, ("--png", args.png) if args.png else None]
    check_outputs([("run A", a_path), ("run B", b_path)], outputs)  # before reading: no input is ever overwritten
    for label, path in (("run A", a_path), ("run B", b_path)):
        if not path.exists():
            raise EvalError(f"{label} {path} not found")
    result = compare(read_run(a_path), read_run(b_path), args.boot, args.seed, args.confidence)
    result = {"inputs": {"a": str(a_path), "b": str(b_path)}, **result}
    low, high = result["ci"]
    print(f"A  pass^1 {result['a']['pass1']:.4f}  {a_path}")
    print(f"B  pass^1 {result['b']['pass1']:.4f}  {b_path}")
    print(
        f"B - A  {result['diff']:+.4f}  {result['confidence']:.0%} CI [{low:+.4f}, {high:+.4f}]  "
        f"({result['share_boot_positive']:.1%} of {result['n_boot']} resamples > 0)"
    )
    print(
        f"paired tasks {result['paired_tasks']}; only in A {len(result['only_in_a'])}, only in B "
        f"{len(result['only_in_b'])}, no valid trial {len(result['no_valid_trial'])}"
    )
    print(f"improved  ({len(result['improved'])}): {_ids(result['improved'])}")
    print(f"regressed ({len(result['regressed'])}): {_ids(result['regressed'])}")
    text = dumps(result, indent=2, allow_nan=False) + "\n"  # NaN here is a bug
    png = None
    if args.png:  # drawn before anything is written: --out and --png land together or not at all
        from rewardkit.runs.stats.plots import render_compare

        png = render_compare(result, f"{b_path} against {a_path}", (a_path.name, b_path.name), f"--png {args.png}")
    with OutputSet() as staged:
        if args.out:
            staged.write_text(args.out, text, "--out")
        if png is not None:
            staged.write_bytes(args.png, png, "--png")
    return 0

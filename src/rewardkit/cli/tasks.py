"""``rewardkit tasks generate``: tasks a model proposes, verified on the real environment (docs/tasks_generate.md).

``add_parsers(sub)`` adds ``tasks``; its handler is ``cmd_tasks_generate``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rewardkit.cli.env import DOMAIN_HELP
from rewardkit.errors import UserError
from rewardkit.files.jsonl import dumps
from rewardkit.files.outputs import OutputSet, check_outputs


def add_parsers(sub: argparse._SubParsersAction) -> None:
    tasks = sub.add_parser("tasks", help="generate tasks for a domain")
    actions = tasks.add_subparsers(dest="action", required=True)
    gen = actions.add_parser(
        "generate",
        help="a model proposes task blueprints; keep those the real environment verifies",
        description="Ask --model for --n task blueprints (one per request), replay each one's gold on a fresh "
        "environment of --domain, and write the ones that pass every check (and the --judge's review) as a JSON "
        "list of tau2 tasks; `rewardkit env check DOMAIN --tasks OUT` passes on it.",
    )
    gen.add_argument("--domain", required=True, help=DOMAIN_HELP)
    gen.add_argument(
        "--model",
        required=True,
        metavar="URL",
        help="the proposer: an OpenAI-compatible URL, or sample (by rule, no model)",
    )
    gen.add_argument("--model-name", help="model name at --model (default: the one model it serves)")
    gen.add_argument("--n", type=int, required=True, help="blueprints to ask for")
    gen.add_argument("--out", type=Path, required=True, metavar="TASKS.json", help="the kept tasks")
    gen.add_argument("--report", type=Path, metavar="REPORT.json", help="counts per reason and kind, the ledgers")
    gen.add_argument("--judge", metavar="URL", help="a model reviews each task the checks pass; keep its accepts")
    gen.add_argument("--judge-model", help="model name at --judge (default: the one model it serves)")
    gen.add_argument("--cache", type=Path, metavar="SQLITE", help="store the answers here: a rerun replays them")
    gen.add_argument("--attempts", type=int, default=3, help="answers asked for per request (default 3)")
    gen.add_argument("--workers", type=int, default=4, help="requests in flight (default 4)")
    gen.add_argument("--seed", type=int, default=0, help="--model sample: which blueprints are drawn (default 0)")
    gen.set_defaults(func=cmd_tasks_generate)


class _FlagError(UserError, ValueError):
    """A bad flag: one line naming it, exit 2."""


def _count(args: argparse.Namespace, name: str) -> int:
    value = getattr(args, name)
    if value < 1:
        raise _FlagError(f"--{name} must be at least 1, got {value}")
    return value


def _model(url: str, name: str | None, flag: str) -> str:
    from rewardkit.loop.endpoint import only_model

    if not url.startswith(("http://", "https://")):
        raise _FlagError(f"{flag} {url!r}: must be an http(s):// URL of an OpenAI-compatible endpoint")
    if name is not None:
        return name
    try:
        return only_model(url, f"pass {flag}-{'name' if flag == '--model' else 'model'}")
    except ValueError as exc:
        raise _FlagError(f"{flag} {url}: {exc}") from exc


def cmd_tasks_generate(args: argparse.Namespace) -> int:
    from rewardkit.envs import get_domain
    from rewardkit.loop.judge import Judge
    from rewardkit.loop.ledger import ledger_lines
    from rewardkit.loop.replies import ReplyStore
    from rewardkit.loop.roles import JsonRole
    from rewardkit.runs.tasks.task_gen import PROMPT_VERSION, generate, headline

    n, attempts, workers = (_count(args, f) for f in ("n", "attempts", "workers"))
    if args.judge_model is not None and args.judge is None:
        raise _FlagError("--judge-model names the judge's model: add --judge URL")
    domain = get_domain(args.domain)
    cache = [("--cache", args.cache)] if args.cache else []
    report_out = ("--report", args.report) if args.report else None
    check_outputs([*domain.input_files(), *cache], [("--out", args.out), report_out])
    store = ReplyStore(args.cache, label="--cache") if args.cache else None
    proposer = None  # --model sample: blueprints sampled from the tools and data by rule
    if args.model != "sample":
        proposer = JsonRole(
            "proposer",
            args.model,
            _model(args.model, args.model_name, "--model"),
            attempts=attempts,
            cache=store,
            version=PROMPT_VERSION,
            temperature=0.7,
            max_tokens=2048,
        )
    judge = None
    if args.judge is not None:
        name = _model(args.judge, args.judge_model, "--judge")
        judge = Judge(JsonRole("judge", args.judge, name, attempts=attempts, cache=store, version=PROMPT_VERSION))
    kept, report = generate(domain, args.domain, proposer, n, judge=judge, workers=workers, seed=args.seed)
    with OutputSet() as outputs:
        outputs.write_text(args.out, dumps(kept, indent=2) + "\n", "--out")
        if args.report:
            outputs.write_text(args.report, dumps(report, indent=2) + "\n", "--report")
    print(headline(report), file=sys.stderr)
    for line in ledger_lines(report["ledger"]):
        print(line, file=sys.stderr)
    print(f"next: rewardkit env check {args.domain} --tasks {args.out}", file=sys.stderr)
    return 0

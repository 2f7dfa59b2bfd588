"""``rewardkit lint reward|RECIPE.yaml|tokens``: preflight checks, a table for people and ``--json`` for CI.

``add_parsers(sub)`` adds ``lint``; its handler is ``cmd_lint``, which dispatches on the first argument:

- ``rewardkit lint reward FILE.py:NAME --data ROWS.jsonl``: the reward contract kit on one reward;
- ``rewardkit lint RECIPE.yaml --dataset FILE [--sft FILE] [--config FILE]``: a recipe's reward set on your rows;
- ``rewardkit lint tokens --model DIR --data FILE [--show N]``: where the loss falls, with ms-swift's encoder.

Exit 0 when every check passes, 1 when one fails, 2 on a usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


class LintUsageError(ValueError):
    """Flags that do not fit the lint asked for (exit 2)."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    lint = sub.add_parser(
        "lint",
        help="preflight: a reward, a recipe's reward set, or where the loss falls",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lint.add_argument("target", metavar="reward|RECIPE.yaml|tokens")
    lint.add_argument("spec", nargs="?", metavar="FILE.py:NAME", help="lint reward: the reward to check")
    lint.add_argument("--data", type=Path, help="lint reward: rows with a gold 'completion'; lint tokens: the rows")
    lint.add_argument("--dataset", type=Path, help="lint RECIPE: your GRPO rows (with their gold, see docs/lint.md)")
    lint.add_argument("--sft", type=Path, help="lint RECIPE: sampled completions per prompt, for zero variance")
    lint.add_argument("--config", help="lint RECIPE: the reward config (default: $REWARDKIT_CONFIG, the recipe's ENV)")
    lint.add_argument("--group-by", metavar="COLUMN", help="lint RECIPE: the --sft column naming the prompt")
    lint.add_argument(
        "--max-zero-variance",
        type=float,
        metavar="SHARE",
        help="lint RECIPE: fail when more of the --sft groups have zero variance",
    )
    lint.add_argument("--margin", type=float, default=0.1, help="a probe this close to the gold gets through")
    lint.add_argument("--time-limit", type=float, default=2.0, metavar="S", help="seconds per completion (p99)")
    lint.add_argument("--model", type=Path, help="lint tokens: the model (or tokenizer) directory")
    lint.add_argument("--show", type=int, default=0, metavar="N", help="lint tokens: print N rows, loss tokens marked")
    lint.add_argument("--template", help="lint tokens: ms-swift template type (default: the model's)")
    lint.add_argument("--agent-template", help="lint tokens: ms-swift agent template (default: the model's)")
    lint.add_argument("--loss-scale", default="default", help="lint tokens: ms-swift loss_scale (default: default)")
    lint.add_argument("--max-length", type=int, help="lint tokens: the template's max_length")
    lint.add_argument("--json", type=Path, metavar="REPORT", help="also write the report as JSON")
    lint.set_defaults(func=cmd_lint)


_ONLY = {
    "reward": {"spec", "data", "margin", "time_limit", "json"},
    "tokens": {"model", "data", "show", "template", "agent_template", "loss_scale", "max_length", "json"},
    "recipe": {"dataset", "sft", "config", "group_by", "max_zero_variance", "margin", "time_limit", "json"},
}
_DEFAULTS = {"margin": 0.1, "time_limit": 2.0, "show": 0, "loss_scale": "default"}


def _check_flags(kind: str, args: argparse.Namespace, required: tuple[str, ...]) -> None:
    for name in required:
        if getattr(args, name) is None:
            raise LintUsageError(
                f"lint {kind} needs --{name.replace('_', '-')}" if name != "spec" else "lint reward needs FILE.py:NAME"
            )
    for name, default in [(n, _DEFAULTS.get(n)) for s in _ONLY.values() for n in s]:
        if name not in _ONLY[kind] and getattr(args, name) != default:
            flag = "FILE.py:NAME" if name == "spec" else "--" + name.replace("_", "-")
            raise LintUsageError(f"{flag} does not apply to lint {kind}")
    if args.margin < 0 or args.time_limit <= 0 or args.show < 0:
        raise LintUsageError("--margin and --show must be >= 0 and --time-limit > 0")


def _console() -> Any:
    from rich.console import Console

    return Console(width=max(120, Console().width))


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        from rewardkit.files.outputs import atomic_write_text

        atomic_write_text(path, json.dumps(report, ensure_ascii=False, indent=2) + "\n", "--json")


def _lint_reward(args: argparse.Namespace) -> int:
    from rewardkit.lint.render import checks_table
    from rewardkit.lint.reward import lint_reward

    _check_flags("reward", args, ("spec", "data"))
    report = lint_reward(args.spec, args.data, margin=args.margin, time_limit_s=args.time_limit)
    failed = len(report.failed())
    title = (
        f"{report.reward}: {failed} of {len(report.checks)} checks failed"
        if failed
        else (f"{report.reward}: all {len(report.checks)} checks passed")
    )
    _console().print(checks_table(report.as_dict()["checks"], title))
    _write_json(args.json, report.as_dict())
    return 0 if report.passed else 1


def _lint_recipe(args: argparse.Namespace) -> int:
    from rewardkit.lint.preflight import Options, lint_recipe
    from rewardkit.lint.render import recipe_view

    _check_flags("recipe", args, ("dataset",))
    if args.sft is None:
        for name in ("group_by", "max_zero_variance"):
            if getattr(args, name) is not None:
                raise LintUsageError(f"--{name.replace('_', '-')} needs --sft (it applies to the --sft samples)")
    if args.max_zero_variance is not None and not 0 <= args.max_zero_variance <= 1:
        raise LintUsageError(f"--max-zero-variance must be a share from 0 to 1; got {args.max_zero_variance:g}")
    opts = Options(
        margin=args.margin,
        time_limit_s=args.time_limit,
        group_by=args.group_by,
        max_zero_variance=args.max_zero_variance,
        config=args.config,
    )
    result = lint_recipe(args.target, args.dataset, args.sft, opts).as_dict()
    _console().print(recipe_view(result))
    _write_json(args.json, result)
    return 0 if result["passed"] else 1


def _lint_tokens(args: argparse.Namespace) -> int:
    from rewardkit.files.jsonl import read_rows
    from rewardkit.lint.render import highlighted, tokens_view
    from rewardkit.lint.tokens import lint_rows, load_template, summary

    _check_flags("tokens", args, ("model", "data"))
    rows = read_rows(args.data, "--data")
    template = load_template(
        args.model,
        template_type=args.template,
        loss_scale=args.loss_scale,
        agent_template=args.agent_template,
        max_length=args.max_length,
    )
    results = lint_rows(template, rows)
    report = summary(results)
    console = _console()
    for row in results[: args.show]:
        console.rule(f"row {row.index + 1}: loss tokens between ⟦ ⟧")
        console.print(highlighted(row))
    console.print(tokens_view(report))
    verdict = "all rows pass" if report["passed"] else f"{len(report['failed_rows'])} of {report['rows']} rows fail"
    console.print(verdict)
    _write_json(args.json, report)
    return 0 if report["passed"] else 1


def cmd_lint(args: argparse.Namespace) -> int:
    if args.target == "reward":
        return _lint_reward(args)
    if args.target == "tokens":
        return _lint_tokens(args)
    if not args.target.endswith((".yaml", ".yml")):
        raise LintUsageError(f"{args.target!r}: expected reward, tokens or a RECIPE.yaml")
    return _lint_recipe(args)

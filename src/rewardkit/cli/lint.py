"""``rewardkit lint reward|RECIPE.yaml|tokens``: preflight checks, a table for people and ``--json`` for CI.

``add_parsers(sub)`` adds ``lint``; its handler is ``cmd_lint``, which dispatches on the first argument:

- ``rewardkit lint reward FILE.py:NAME --data ROWS.jsonl``: the reward contract kit on one reward;
- ``rewardkit lint RECIPE.yaml --dataset FILE [--sft FILE] [--config FILE]``: a recipe's reward set on your rows;
- ``rewardkit lint tokens --model DIR --data FILE [--show N]``: where the loss falls, with ms-swift's encoder.

Exit 0 when every check passes, 1 when one fails, 2 on a usage error (one line on stderr).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rewardkit.errors import UserError
from rewardkit.files.jsonl import dumps
from rewardkit.testing.checks import DRAWS
from rewardkit.testing.kit import CHECK_TIME_S
from rewardkit.testing.report import safe_text


class LintUsageError(UserError, ValueError):
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
        type=_number(0.0, 1.0),
        metavar="SHARE",
        help="lint RECIPE: fail when more of the --sft groups have zero variance",
    )
    lint.add_argument(
        "--margin",
        type=_number(0.0, 1e6),
        help="a probe this close to the gold gets through (default 0.1; lint RECIPE: a share of the weights' sum, "
        "at most 1)",
    )
    lint.add_argument(
        "--time-limit", type=_number(0.0, 3600.0, True), default=2.0, metavar="S", help="seconds per completion"
    )
    lint.add_argument(
        "--skip", action="append", default=[], metavar="CHECK", help="lint reward: leave a check (or group) out"
    )
    lint.add_argument("--no-isolate", action="store_true", help="lint reward: run every check in this process")
    lint.add_argument("--draws", type=_count(1), default=DRAWS, metavar="N", help="lint reward: determinism scores")
    lint.add_argument(
        "--check-time",
        type=_number(0.0, 86400.0, True),
        default=CHECK_TIME_S,
        metavar="S",
        help="lint reward: seconds for the import and for each check",
    )
    lint.add_argument("--model", type=Path, help="lint tokens: the model (or tokenizer) directory")
    lint.add_argument(
        "--show", type=_count(0), default=0, metavar="N", help="lint tokens: print N rows, loss tokens marked"
    )
    lint.add_argument("--template", help="lint tokens: ms-swift template type (default: the model's)")
    lint.add_argument("--agent-template", help="lint tokens: ms-swift agent template (default: the model's)")
    lint.add_argument("--loss-scale", default="default", help="lint tokens: ms-swift loss_scale (default: default)")
    lint.add_argument("--max-length", type=int, help="lint tokens: the template's max_length")
    lint.add_argument("--json", type=Path, metavar="REPORT", help="also write the report as JSON")
    lint.set_defaults(func=cmd_lint)


def _number(low: float, high: float, low_open: bool = False) -> Any:
    """An argparse type: a finite number in [low, high] (``(low, high]`` with ``low_open``); NaN and inf refused."""
    bound = f"{'(' if low_open else '['}{low:g}, {high:g}]"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or not low <= value <= high or (low_open and value == low):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number in {bound}")
        return value

    return parse


def _count(low: int) -> Any:
    """An argparse type: an integer >= ``low``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= {low}")
        return value

    return parse


_ONLY = {
    "reward": {"spec", "data", "margin", "time_limit", "skip", "no_isolate", "draws", "check_time", "json"},
    "tokens": {"model", "data", "show", "template", "agent_template", "loss_scale", "max_length", "json"},
    "recipe": {"dataset", "sft", "config", "group_by", "max_zero_variance", "margin", "time_limit", "json"},
}
_DEFAULTS = {
    "margin": None,
    "time_limit": 2.0,
    "show": 0,
    "loss_scale": "default",
    "skip": [],
    "no_isolate": False,
    "draws": DRAWS,
    "check_time": CHECK_TIME_S,
}


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


def _inputs(kind: str, args: argparse.Namespace) -> list[tuple[str, Path]]:
    """The files a lint reads, labelled by flag, for :func:`~rewardkit.files.outputs.check_outputs`: the reward's
    file, the data, the recipe and what it names, and every file of the model directory."""
    if kind == "reward":
        path = Path(args.spec.rpartition(":")[0] or args.spec)
        return [("FILE.py", path), ("--data", args.data)]
    if kind == "recipe":
        named = [("RECIPE", Path(args.target)), ("--dataset", args.dataset), ("--sft", args.sft)]
        return named + ([("--config", Path(args.config))] if args.config else [])
    model = [("--model", f) for f in sorted(args.model.rglob("*"))] if args.model.is_dir() else []
    return [("--data", args.data), ("--model", args.model), *model]


def _guard(kind: str, args: argparse.Namespace, extra: tuple[Path, ...] = ()) -> None:
    """``--json`` is none of the lint's inputs (nor ``extra``) and can be written: checked before any scoring."""
    from rewardkit.files.outputs import check_outputs

    if args.json is None:
        return
    inputs = [(flag, path) for flag, path in _inputs(kind, args) if path is not None]
    check_outputs([*inputs, *(("the reward config", p) for p in extra)], [("--json", args.json)])


def _console() -> Any:
    from rich.console import Console

    return Console(width=max(120, Console().width))


def _write_json(path: Path | None, report: dict[str, Any]) -> None:
    if path is not None:
        from rewardkit.files.outputs import atomic_write_text

        atomic_write_text(path, dumps(report, indent=2) + "\n", "--json")


def _lint_reward(args: argparse.Namespace) -> int:
    from rewardkit.lint.render import checks_table
    from rewardkit.lint.reward import lint_reward

    _check_flags("reward", args, ("spec", "data"))
    _guard("reward", args)
    skip = [name.strip() for flag in args.skip for name in flag.split(",") if name.strip()]
    report = lint_reward(
        args.spec,
        args.data,
        margin=args.margin,  # None: the kit's default, 0.1 or the reward's narrower range
        time_limit_s=args.time_limit,
        skip=skip,
        isolate=not args.no_isolate,
        draws=args.draws,
        check_time_s=args.check_time,
    )
    failed = len(report.failed())
    left = f" ({len(report.skipped)} skipped)" if report.skipped else ""
    title = (
        f"{report.reward}: {failed} of {len(report.checks)} checks failed{left}"
        if failed
        else f"{report.reward}: all {len(report.checks)} checks passed{left}"
    )
    console = _console()
    console.print(checks_table(report.as_dict()["checks"], safe_text(title)))
    if report.skipped:
        console.print(f"skipped: {', '.join(report.skipped)}")
    _write_json(args.json, report.as_dict())
    return 0 if report.passed else 1


def _lint_recipe(args: argparse.Namespace) -> int:
    from rewardkit.lint.preflight import Options, lint_recipe
    from rewardkit.lint.recipe import read_recipe
    from rewardkit.lint.render import recipe_view

    _check_flags("recipe", args, ("dataset",))
    if args.sft is None:
        for name in ("group_by", "max_zero_variance"):
            if getattr(args, name) is not None:
                raise LintUsageError(f"--{name.replace('_', '-')} needs --sft (it applies to the --sft samples)")
    spec = read_recipe(args.target, args.config)  # first: it names the reward config, one more input
    _guard("recipe", args, (spec.config,) if spec.config is not None else ())
    opts = Options(
        margin=0.1 if args.margin is None else args.margin,
        time_limit_s=args.time_limit,
        group_by=args.group_by,
        max_zero_variance=args.max_zero_variance,
        config=args.config,
    )
    result = lint_recipe(spec, args.dataset, args.sft, opts).as_dict()
    _console().print(recipe_view(result))
    _write_json(args.json, result)
    return 0 if result["passed"] else 1


def _lint_tokens(args: argparse.Namespace) -> int:
    from rewardkit.files.jsonl import lines, read_rows
    from rewardkit.lint.render import highlighted, tokens_view
    from rewardkit.lint.tokens import lint_rows, load_template, summary

    _check_flags("tokens", args, ("model", "data"))
    _guard("tokens", args)
    rows = read_rows(args.data, "--data")
    where = [line.where(args.data) for line in lines(args.data)]  # FILE:LINE of each row, for its errors
    template = load_template(
        args.model,
        template_type=args.template,
        loss_scale=args.loss_scale,
        agent_template=args.agent_template,
        max_length=args.max_length,
    )
    results = lint_rows(template, rows, where)
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

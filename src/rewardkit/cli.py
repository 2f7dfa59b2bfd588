"""The ``rewardkit`` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from rewardkit.cli_build import add_build_parser
from rewardkit.cli_env import add_env_parsers
from rewardkit.cli_recipe import add_recipe_parsers

DEFAULT_DEMO = Path("examples/planning/completions.jsonl")


def _first_line(doc: str | None) -> str:
    return (doc or "").strip().splitlines()[0] if doc else ""


def cmd_rewards(args: argparse.Namespace) -> int:
    from swift.rewards import orms

    from rewardkit.rewards import REWARDS

    width = max(map(len, REWARDS))
    for key, cls in REWARDS.items():
        assert orms.get(key) is cls, f"{key} is not registered in ms-swift's orms"
        print(f"{key:<{width}}  {cls.__name__:<18} {_first_line(cls.__doc__)}")
    return 0


def cmd_score(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from rewardkit.rewards import REWARDS
    from rewardkit.scoring import read_jsonl, score_rows

    path = Path(args.data)
    if not path.is_file():
        print(f"rewardkit: {path} not found (run from the repository root or pass --data)", file=sys.stderr)
        return 2
    table = score_rows(read_jsonl(path))
    view = Table(title=f"planning rewards on {path}", show_footer=True)
    view.add_column("completion", footer="mean")
    means = table.means()
    for key, mean, weight in zip(table.keys, means, table.weights, strict=True):
        view.add_column(f"{REWARDS[key].__name__}\n×{weight:g}", justify="right", footer=f"{mean:.3f}")
    view.add_column("weighted", justify="right", footer=f"{table.mean_total():.3f}")
    for i, name in enumerate(table.names):
        cells = ["—" if s is None else f"{s:.3f}" for s in table.scores[i]]
        view.add_row(name, *cells, f"{table.total(i):.3f}")
    Console(width=max(160, Console().width)).print(view)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rewardkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("rewards", help="list the registered reward keys")
    p.set_defaults(func=cmd_rewards)
    for name, helptext in (("score", "score a JSONL of completions"), ("demo", "score the bundled examples")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--data", default=str(DEFAULT_DEMO), help="JSONL with completion, solution, experts")
        p.set_defaults(func=cmd_score)
    add_build_parser(sub)
    add_recipe_parsers(sub)
    add_env_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())

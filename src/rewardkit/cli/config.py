"""``rewardkit config example|table|check``: the reference generated from the config declarations.

``add_parsers(sub)`` adds ``config``; its handlers are ``cmd_config_example`` (print, or rewrite
``recipes/planning/reward_config.yaml`` with ``--write``), ``cmd_config_table`` (print the key table of
``docs/config.md`` with its markers, or replace it in a page with ``--write PAGE``) and ``cmd_config_check``
(exit 1 when the example file, or a page given with ``--docs``, differs from what the declarations generate).
The schema is the whole file's, ``rewardkit.loop.config.RUN_SCHEMA``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXAMPLE = "planning/reward_config.yaml"  # under recipes/
WRITE_HINT = "rewardkit config example --write"
TABLE_HINT = "rewardkit config table --write docs/config.md"

HEADER = f"""\
# rewardkit configuration ($REWARDKIT_CONFIG): every key at its default. The merchant planner's rewards
# (docs/planning_rewards.md) read the top-level keys and their sections; user_sim and rollout are read by
# multi-turn rollouts only. Point REWARDKIT_CONFIG at this file (a recipe's ENV block does it); every key
# is optional and falls back to the default shown here.
#
# Generated from the config sections (docs/config.md says where each is declared);
# do not edit by hand: {WRITE_HINT}
"""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    config = sub.add_parser("config", help="print, write or check the generated config reference")
    actions = config.add_subparsers(dest="action", required=True)
    example = actions.add_parser("example", help="print the example file (every key at its default)")
    example.add_argument("--write", action="store_true", help=f"rewrite recipes/{EXAMPLE} instead")
    example.set_defaults(func=cmd_config_example)
    table = actions.add_parser("table", help="print the Markdown key table with its markers")
    table.add_argument("--write", type=Path, metavar="PAGE", help="replace the table between PAGE's markers instead")
    table.set_defaults(func=cmd_config_table)
    check = actions.add_parser("check", help=f"exit 1 if recipes/{EXAMPLE} is out of date")
    check.add_argument("--docs", type=Path, metavar="PAGE", help="check the key table of PAGE too")
    check.set_defaults(func=cmd_config_check)


def _example() -> tuple[Path, str]:
    from rewardkit.config.reference import render_example
    from rewardkit.loop.config import RUN_SCHEMA
    from rewardkit.recipes import ROOT

    return ROOT / EXAMPLE, render_example(RUN_SCHEMA, HEADER)


def _table() -> str:
    from rewardkit.config.reference import render_table
    from rewardkit.loop.config import RUN_SCHEMA

    return render_table(RUN_SCHEMA)


def _page_with_table(page: Path) -> tuple[str, str | None]:
    """The page's text, and the same with the generated table between its markers (None: no markers)."""
    from rewardkit.config.reference import with_table

    text = page.read_text(encoding="utf-8")
    try:
        return text, with_table(text, _table())
    except ValueError:
        return text, None


def _no_markers(page: Path) -> str:
    from rewardkit.config.reference import TABLE_BEGIN, TABLE_END

    return f"{page}: no key-table markers; add the lines {TABLE_BEGIN} and {TABLE_END}"


def cmd_config_example(args: argparse.Namespace) -> int:
    from rewardkit.files.outputs import atomic_write_text

    path, text = _example()
    if not args.write:
        sys.stdout.write(text)
        return 0
    atomic_write_text(path, text)
    print(f"wrote {path}")
    return 0


def cmd_config_table(args: argparse.Namespace) -> int:
    from rewardkit.config.reference import table_block
    from rewardkit.files.outputs import atomic_write_text

    if args.write is None:
        sys.stdout.write(table_block(_table()))
        return 0
    _, text = _page_with_table(args.write)
    if text is None:
        print(f"rewardkit config table: {_no_markers(args.write)}", file=sys.stderr)
        return 2
    atomic_write_text(args.write, text)
    print(f"wrote the key table into {args.write}")
    return 0


def cmd_config_check(args: argparse.Namespace) -> int:
    path, text = _example()
    current = path.read_text(encoding="utf-8") if path.is_file() else ""
    stale = []
    if current != text:
        stale.append(f"{path} is out of date; run `{WRITE_HINT}`")
    if args.docs is not None:
        page, regenerated = _page_with_table(args.docs)
        if regenerated is None:
            stale.append(_no_markers(args.docs))
        elif page != regenerated:
            stale.append(f"{args.docs}'s key table is out of date; run `{TABLE_HINT}`")
    for line in stale:
        print(line, file=sys.stderr)
    if not stale:
        print(f"{path} is up to date" + (f", and so is {args.docs}" if args.docs is not None else ""))
    return 1 if stale else 0

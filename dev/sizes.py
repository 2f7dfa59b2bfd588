"""A report, not a rule: the package's longest files and functions, to read when a concept may want splitting.

A long file that holds one concept is fine; a split that makes two files import each other is not. Read each entry
as a question, not a failure. ``make sizes`` prints it.

    python dev/sizes.py [--files 300] [--functions 60]
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src/rewardkit", "rewards", "plugins", "recipes", "data_builders")  # the package's folders


def long_functions(source: str, path: str, limit: int) -> list[tuple[int, str]]:
    """``(lines, "path:line name")`` for every function longer than ``limit`` lines (``def`` to its last line;
    nested functions are measured on their own as well as inside their parent)."""
    return [
        (node.end_lineno - node.lineno + 1, f"{path}:{node.lineno} {node.name}")
        for node in ast.walk(ast.parse(source, filename=path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300, help="list files longer than this many lines")
    parser.add_argument("--functions", type=int, default=60, help="list functions longer than this many lines")
    args = parser.parse_args()
    paths = [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    files, functions = [], []
    for path in paths:
        text, name = path.read_text(encoding="utf-8"), str(path.relative_to(ROOT))
        if (n := len(text.splitlines())) > args.files:
            files.append((n, name))
        functions += long_functions(text, name, args.functions)
    for title, rows in (
        (f"files over {args.files} lines", files),
        (f"functions over {args.functions} lines", functions),
    ):
        print(f"{title}: {len(rows)}")
        for n, name in sorted(rows, reverse=True):
            print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()

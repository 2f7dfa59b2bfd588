"""No function of the package runs past 60 lines, read from the source with :mod:`ast` (nothing is imported).

A function's length is ``end_lineno - lineno + 1`` of its ``def`` (decorators not counted, its docstring
counted); nested functions and methods are measured on their own as well as inside their parent.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("src/rewardkit", "rewards", "plugins", "recipes", "data_builders")  # the package's folders
LIMIT = 60


def long_functions(source: str, path: str, limit: int = LIMIT) -> list[str]:
    """``path:line name (N lines)`` for every function in ``source`` longer than ``limit`` lines."""
    return [
        f"{path}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(ast.parse(source, filename=path))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    ]


def test_the_package_folders_hold_python_files() -> None:
    for folder in FOLDERS:
        assert any((ROOT / folder).rglob("*.py")), f"{folder} holds no .py file: is FOLDERS out of date?"


def test_no_function_is_longer_than_the_limit() -> None:
    found = [
        problem
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for problem in long_functions(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]
    assert not found, (
        f"functions longer than {LIMIT} lines:\n  " + "\n  ".join(found) + "\nsplit each into well-named helpers "
        f"(one job each) so that no function, nested ones included, runs past {LIMIT} lines"
    )


def test_the_check_measures_nested_functions_and_methods() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(3))
    source = f"def outer():\n    def inner():\n{body.replace('    ', '        ')}    return inner\n\n"
    source += f"class C:\n    async def method(self):\n{body.replace('    ', '        ')}"
    assert long_functions(source, "m.py", limit=4) == ["m.py:1 outer (6 lines)"]
    assert long_functions(source, "m.py", limit=3) == [
        "m.py:1 outer (6 lines)",
        "m.py:2 inner (4 lines)",
        "m.py:9 method (4 lines)",
    ]
